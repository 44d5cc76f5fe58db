package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The vector SwiGLU tail and negation give the scalar loops' bits on every
// lane: random rows with the values that take other branches (NaN, ±Inf,
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
