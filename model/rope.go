package model

import "math"

// RoPE in the rotate-half form of Hugging Face's Qwen2: for i < HS/2 the
// pair (x_i, x_{i+HS/2}) of each head turns by pos·theta^(−2i/HS).
// Angles are computed in float64 from the integer position, so long
// contexts lose no precision to an accumulated angle.
func (d *CPU[F]) RoPE(x Buffer, ld, off int, pos []int32, nHeads, HS int, theta float64) {
	d.rope(buf[F](x), ld, off, pos, nHeads, HS, theta, 1)
}

// RoPEBackward rotates the gradient back: the rotation is orthogonal, so its
// transpose is the rotation by the opposite angle.
func (d *CPU[F]) RoPEBackward(dx Buffer, ld, off int, pos []int32, nHeads, HS int, theta float64) {
	d.rope(buf[F](dx), ld, off, pos, nHeads, HS, theta, -1)
}

func (d *CPU[F]) rope(x []F, ld, off int, pos []int32, nHeads, HS int, theta float64, sign float64) {
	half := HS / 2
	invFreq := make([]float64, half)
	for i := range invFreq {
		// HF computes inv_freq in float32: 1/theta^(2i/HS) rounded to float32.
		invFreq[i] = float64(float32(1 / math.Pow(theta, float64(2*i)/float64(HS))))
	}
	d.parallel(len(pos), 8, func(lo, hi int) {
		cos, sin := make([]float64, half), make([]float64, half)
		for t := lo; t < hi; t++ {
			p := float64(pos[t])
			for i := range half {
				a := float64(float32(p * invFreq[i]))
				cos[i], sin[i] = math.Cos(a), sign*math.Sin(a)
			}
			row := x[t*ld+off:]
			for h := 0; h < nHeads; h++ {
				v := row[h*HS : (h+1)*HS]
				for i := 0; i < half; i++ {
					a, b := float64(v[i]), float64(v[i+half])
					v[i] = F(a*cos[i] - b*sin[i])
					v[i+half] = F(b*cos[i] + a*sin[i])
				}
			}
		}
	})
}
