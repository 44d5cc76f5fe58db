package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/r1go/r1go/internal/bf16"
)

// TestAddVector: the vector add gives the loop's bits at lengths around
// its 64 lanes, in place too (o = x), and AddBias over a bf16 bias adds
// each row the widened bias, as element-by-element float32 adds.
func TestAddVector(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	val := func() float32 {
		if rng.IntN(16) == 0 {
			return []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, 1e-40}[rng.IntN(5)]
		}
		return float32(rng.NormFloat64() * 100)
	}
	defer func() { addNoVector = false }()
	for _, n := range []int{0, 1, 63, 64, 65, 127, 128, 896, 1000} {
		x, y := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i], y[i] = val(), val()
		}
		want := make([]float32, n)
		for i := range want {
			want[i] = x[i] + y[i]
		}
		for _, noVector := range []bool{false, true} {
			addNoVector = noVector
			got := make([]float32, n)
			addRow(got, x, y)
			inPlace := append([]float32(nil), x...)
			addRow(inPlace, inPlace, y)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) || math.Float32bits(inPlace[i]) != math.Float32bits(want[i]) {
					t.Fatalf("n=%d noVector=%v, element %d: %v + %v gave %v (in place %v), want %v", n, noVector, i, x[i], y[i], got[i], inPlace[i], want[i])
				}
			}
		}
	}
	const rows, cols, ld = 5, 1152, 1200
	d := &Device[float32]{threads: 2}
	bias := d.AllocBF16(cols)
	bv := make([]float32, cols)
	for i := range bv {
		bv[i] = val()
	}
	d.Upload(bias, bv)
	bh, _ := asBF16(bias)
	out := make([]float32, rows*ld)
	for i := range out {
		out[i] = val()
	}
	want := append([]float32(nil), out...)
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			want[r*ld+c] += bf16.ToFloat32(bh[c])
		}
	}
	d.AddBias(cpuBuf[float32](out), ld, bias, rows, cols)
	for i := range out {
		if math.Float32bits(out[i]) != math.Float32bits(want[i]) {
			t.Fatalf("AddBias: element %d is %v, want %v", i, out[i], want[i])
		}
	}
}
