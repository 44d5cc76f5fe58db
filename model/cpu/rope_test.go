package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRoPETableSameBits: rotations through the shared angle table (and
// past its end, row by row) have the bits of the angles computed per row
// in float64 from HF's float32 inverse frequencies, forward and back (at
// the negated positions, the sine's sign flipped), with the vector kernel
// (heads of 16 and 64) and without.
func TestRoPETableSameBits(t *testing.T) {
	for _, noVector := range []bool{false, true} {
		for _, HS := range []int{16, 64, 12} {
			ropeNoVector = noVector
			testRoPESameBits(t, HS)
		}
	}
	ropeNoVector = false
}

// testRoPESameBits is TestRoPETableSameBits for heads of HS values, some
// of them ±0, ±Inf, NaN or denormal.
func testRoPESameBits(t *testing.T, HS int) {
	const nHeads, theta = 3, 1e6
	d := &Device[float32]{threads: 2}
	r := rand.New(rand.NewPCG(1, 2))
	pos := []int32{0, 1, 7, 300, 299, ropeTableMax - 1, ropeTableMax + 5, 2, 1 << 20}
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.NaN()), 1e-41, -3e38}
	for _, sign := range []float64{1, -1} {
		x := make([]float32, len(pos)*nHeads*HS)
		for i := range x {
			x[i] = float32(r.NormFloat64())
			if r.IntN(20) == 0 {
				x[i] = special[r.IntN(len(special))]
			}
		}
		want := append([]float32(nil), x...)
		half := HS / 2
		for ti, p := range pos {
			for h := 0; h < nHeads; h++ {
				v := want[(ti*nHeads+h)*HS:][:HS]
				for i := 0; i < half; i++ {
					f := float64(float32(1 / math.Pow(theta, float64(2*i)/float64(HS))))
					ang := float64(float32(float64(p) * f))
					c, s := math.Cos(ang), sign*math.Sin(ang)
					a, b := float64(v[i]), float64(v[i+half])
					v[i], v[i+half] = float32(float64(a*c)-float64(b*s)), float32(float64(b*c)+float64(a*s))
				}
			}
		}
		signed := make([]int32, len(pos))
		for i, p := range pos {
			signed[i] = int32(sign) * p
		}
		d.RoPE(cpuBuf[float32](x), nHeads*HS, 0, signed, nHeads, HS, theta)
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(want[i]) {
				t.Fatalf("HS %d, vector off %v, sign %g: element %d (position %d) = %g, per-row angles give %g", HS, ropeNoVector, sign, i, pos[i/(nHeads*HS)], x[i], want[i])
			}
		}
	}
}
