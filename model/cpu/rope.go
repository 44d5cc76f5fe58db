package cpu

import (
	"math"
	"sync"

	"github.com/r1go/r1go/model"
)

// RoPE in the rotate-half form of Hugging Face's Qwen2: for i < HS/2 the
// pair (x_i, x_{i+HS/2}) of each head turns by pos·theta^(−2i/HS).
// Angles are computed in float64 from the integer position, so long
// contexts lose no precision to an accumulated angle. A negative position
// turns by the opposite of its magnitude's angle: the table's, the sine's
// sign flipped (the backward rotates the gradient back at the negated
// positions: the rotation is orthogonal, its transpose turns the other way).
func (d *Device[F]) RoPE(xb model.Buffer, ld, off int, pos []int32, nHeads, HS int, theta float64) {
	defer d.timed(opRoPE)()
	x := buf[F](xb)
	half := HS / 2
	maxPos := int32(-1)
	for _, p := range pos {
		maxPos = max(maxPos, p, -p)
	}
	tab := ropeAngles(theta, HS, int(maxPos)+1)
	// A part of at least 64 rows: a decode step's 32 (14 heads of q or 2
	// of k) rotate on one thread, in less than a parallel loop's start
	// and join (BenchmarkDecodeHostOps).
	d.parallel(len(pos), 64, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			p, sign := int(pos[t]), 1.0
			if p < 0 {
				p, sign = -p, -1
			}
			var cos, sin []float64
			if p >= 0 && p < tab.n {
				cos, sin = tab.cos[p*half:][:half], tab.sin[p*half:][:half]
			} else { // beyond the table: this row's own angles
				cos, sin = make([]float64, half), make([]float64, half)
				tab.angles(p, cos, sin)
			}
			row := x[t*ld+off:]
			if r32, ok := any(row).([]float32); ok && ropeVector && !ropeNoVector && half%8 == 0 && nHeads > 0 {
				_ = r32[nHeads*HS-1]
				ropeRowAVX512(&r32[0], nHeads, HS, &cos[0], &sin[0], sign)
				continue
			}
			for h := 0; h < nHeads; h++ {
				v := row[h*HS : (h+1)*HS]
				for i := 0; i < half; i++ {
					// Each product converted: the compiler may not fuse it
					// with the sum (GOAMD64=v3), so the kernel's bits hold.
					a, b := float64(v[i]), float64(v[i+half])
					v[i] = F(float64(a*cos[i]) - float64(sign*b*sin[i]))
					v[i+half] = F(float64(b*cos[i]) + float64(sign*a*sin[i]))
				}
			}
		}
	})
}

// ropeNoVector turns the vector kernel off (tests).
var ropeNoVector bool

// ropeTable holds cos and sin of every angle for positions [0, n), half
// values a position: a decode step rotates q and k in every layer at the
// same positions, and math.Cos and math.Sin of each were 2-4 % of a
// batch-32 bf16 step on AMX, 2 cores. The values are those computed per
// row (the same expression), so the table changes no bit.
type ropeTable struct {
	invFreq  []float64
	n        int
	cos, sin []float64
}

// ropeTableMax bounds a table's positions (a 128-wide head: 32 MiB each
// for cos and sin; Qwen2.5's 64-wide heads at a 4,096-token context: 1 MiB).
const ropeTableMax = 1 << 16

var ropeTables struct {
	sync.Mutex
	byShape map[[2]float64]*ropeTable
}

// ropeAngles returns the table of theta and HS covering positions below
// n where n ≤ ropeTableMax, grown (as a new table: callers keep theirs)
// when it is shorter.
func ropeAngles(theta float64, HS, n int) *ropeTable {
	ropeTables.Lock()
	defer ropeTables.Unlock()
	key := [2]float64{theta, float64(HS)}
	t := ropeTables.byShape[key]
	if t == nil {
		half := HS / 2
		t = &ropeTable{invFreq: make([]float64, half)}
		for i := range t.invFreq {
			// HF computes inv_freq in float32: 1/theta^(2i/HS) rounded to float32.
			t.invFreq[i] = float64(float32(1 / math.Pow(theta, float64(2*i)/float64(HS))))
		}
		if ropeTables.byShape == nil {
			ropeTables.byShape = map[[2]float64]*ropeTable{}
		}
		ropeTables.byShape[key] = t
	}
	n = min(n, ropeTableMax)
	if t.n >= n {
		return t
	}
	half := len(t.invFreq)
	grown := &ropeTable{invFreq: t.invFreq, n: min(max(n, 2*t.n, 256), ropeTableMax)}
	grown.cos, grown.sin = make([]float64, grown.n*half), make([]float64, grown.n*half)
	copy(grown.cos, t.cos)
	copy(grown.sin, t.sin)
	for p := t.n; p < grown.n; p++ {
		grown.angles(p, grown.cos[p*half:][:half], grown.sin[p*half:][:half])
	}
	ropeTables.byShape[key] = grown
	return grown
}

// angles sets cos and sin of position p's angles.
func (t *ropeTable) angles(p int, cos, sin []float64) {
	for i, f := range t.invFreq {
		a := float64(float32(float64(p) * f))
		cos[i], sin[i] = math.Cos(a), math.Sin(a)
	}
}
