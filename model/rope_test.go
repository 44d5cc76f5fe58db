package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRoPETableSameBits: rotations through the shared angle table (and
// past its end, row by row) have the bits of the angles computed per row
// in float64 from HF's float32 inverse frequencies, forward and back.
func TestRoPETableSameBits(t *testing.T) {
	const nHeads, HS, theta = 3, 16, 1e6
	d := &CPU[float32]{threads: 2}
	r := rand.New(rand.NewPCG(1, 2))
	pos := []int32{0, 1, 7, 300, 299, ropeTableMax - 1, ropeTableMax + 5, 2, 1 << 20}
	for _, sign := range []float64{1, -1} {
		x := make([]float32, len(pos)*nHeads*HS)
		for i := range x {
			x[i] = float32(r.NormFloat64())
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
					v[i], v[i+half] = float32(a*c-b*s), float32(b*c+a*s)
				}
			}
		}
		d.rope(x, nHeads*HS, 0, pos, nHeads, HS, theta, sign)
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(want[i]) {
				t.Fatalf("sign %g: element %d (position %d) = %g, per-row angles give %g", sign, i, pos[i/(nHeads*HS)], x[i], want[i])
			}
		}
	}
}
