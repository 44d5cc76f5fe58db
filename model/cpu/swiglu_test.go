package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The vector SwiGLU tail, the rollout copy's fused pass and negation
// give the scalar loops' bits on every lane: random rows with the values that take other branches (NaN, ±Inf,
// ±0, denormals, gates whose e^(−g) overflows or underflows), at lengths
// around the kernels' 8 and 16 lanes.
func TestSwiGLUTailBitForBit(t *testing.T) {
	if !swigluVector {
		t.Skip("no vector SwiGLU kernel on this CPU")
	}
	rng := rand.New(rand.NewPCG(41, 42))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		1e-40, -1e-40, 88.8, -88.8, 104, -104, 1e30, -1e30, math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32}
	val := func() float32 {
		if rng.IntN(8) == 0 {
			return special[rng.IntN(len(special))]
		}
		return float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(7)-3)))
	}
	defer func() { swigluNoVector = false }()
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 4864, 4871} {
		gate, up := make([]float32, n), make([]float32, n)
		neg, ex := make([]float32, n), make([]float32, n)
		for i := range gate {
			gate[i], up[i] = val(), val()
			neg[i] = -gate[i]
		}
		expInto(ex, neg)
		got, want := make([]float32, n), make([]float32, n)
		swigluNoVector = false
		swigluTail(got, gate, up, ex)
		swigluNoVector = true
		swigluTail(want, gate, up, ex)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("n=%d, element %d (gate %v, up %v, e^-g %v): vector %v (%#x), scalar %v (%#x)",
					n, i, gate[i], up[i], ex[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
		}
		// The rollout copy's SwiGLU (one fused pass over the vectors) is
		// the float32 loop of exp32, bit for bit, with the kernel and
		// without.
		gu := append(append([]float32(nil), gate...), up...)
		for _, noVector := range []bool{false, true} {
			swigluNoVector = noVector
			fused := make([]float32, n)
			(&Device[float32]{threads: 1}).SwiGLU32(cpuBuf[float32](fused), cpuBuf[float32](gu), 1, n)
			for i := range fused {
				want := gate[i] / (1 + exp32(-gate[i])) * up[i]
				if math.Float32bits(fused[i]) != math.Float32bits(want) {
					t.Fatalf("SwiGLU32 (vector off %v), n=%d, element %d (gate %v, up %v): %v (%#x), the loop %v (%#x)",
						noVector, n, i, gate[i], up[i], fused[i], math.Float32bits(fused[i]), want, math.Float32bits(want))
				}
			}
		}
		// The vector negation flips the sign bit of every lane, as Go's does.
		vneg := make([]float32, n)
		swigluNoVector = false
		negate(vneg, gate)
		for i := range vneg {
			if math.Float32bits(vneg[i]) != math.Float32bits(neg[i]) {
				t.Fatalf("n=%d, element %d: −(%v) is %#x, Go's %#x", n, i, gate[i], math.Float32bits(vneg[i]), math.Float32bits(neg[i]))
			}
		}
	}
}

// TestSwiGLU32Accuracy: the rollout copy's float32 SwiGLU is within 2⁻²⁰
// (relative, eight float32 ulps) of silu(g)·up in float64 wherever that
// is a normal float32, for gates across the range where the sigmoid
// turns and beyond, rows of 4,871 (vector lanes and a tail); NaN stays
// NaN and a gate whose e^(−g) overflows gives a zero.
func TestSwiGLU32Accuracy(t *testing.T) {
	const rows, I = 3, 4871
	rng := rand.New(rand.NewPCG(5, 6))
	gu := make([]float32, rows*2*I)
	for i := range gu {
		gu[i] = float32(rng.NormFloat64() * 6)
	}
	gu[0], gu[1], gu[2] = float32(math.NaN()), -100, 100
	d := &Device[float32]{threads: 2}
	out := make([]float32, rows*I)
	d.SwiGLU32(cpuBuf[float32](out), cpuBuf[float32](gu), rows, I)
	for r := 0; r < rows; r++ {
		for i := 0; i < I; i++ {
			g, u := float64(gu[r*2*I+i]), float64(gu[r*2*I+I+i])
			want := g / (1 + math.Exp(-g)) * u
			got := float64(out[r*I+i])
			switch {
			case math.IsNaN(g):
				if !math.IsNaN(got) {
					t.Fatalf("row %d, element %d: gate NaN gave %v", r, i, got)
				}
			case math.Abs(want) < 0x1p-126:
				if math.Abs(got) > 0x1p-126 {
					t.Fatalf("row %d, element %d (gate %v, up %v): %v, want %v", r, i, g, u, got, want)
				}
			case math.Abs(got-want) > math.Abs(want)*0x1p-20:
				t.Fatalf("row %d, element %d (gate %v, up %v): %v, want %v (relative error %.3g)", r, i, g, u, got, want, math.Abs(got-want)/math.Abs(want))
			}
		}
	}
	if out[1] != 0 {
		t.Errorf("gate −100: %v, want a zero", out[1])
	}
}
