package model

import (
	"fmt"
	"math"
)

// Causal grouped-query attention over packed sequences. Query head h reads
// key-value head h/(NH/KVH), as Hugging Face's repeat_kv does. The forward
// keeps only the log-normaliser of each softmax row; the backward recomputes
// the probabilities from it, flash-attention style, so no [T, T] matrix is
// ever stored.

type attnDims struct{ NH, KVH, HS, W, qOff, kOff, vOff int }

func newAttnDims(NH, KVH, HS int) attnDims {
	if NH%KVH != 0 {
		panic(fmt.Sprintf("model: %d query heads are not a multiple of %d key-value heads", NH, KVH))
	}
	return attnDims{NH: NH, KVH: KVH, HS: HS, W: (NH + 2*KVH) * HS, qOff: 0, kOff: NH * HS, vOff: (NH + KVH) * HS}
}

func checkSeqs(seqs []int32, T int) {
	if len(seqs) < 2 || seqs[0] != 0 || int(seqs[len(seqs)-1]) != T {
		panic(fmt.Sprintf("model: sequence offsets %v do not cover %d tokens", seqs, T))
	}
}

func (d *CPU[F]) Attention(out, lse, qkv Buffer, seqs []int32, NH, KVH, HS int) {
	o, L, x := buf[F](out), buf[F](lse), buf[F](qkv)
	a := newAttnDims(NH, KVH, HS)
	T := len(x) / a.W
	checkSeqs(seqs, T)
	scale := 1 / math.Sqrt(float64(HS))
	// One task per (head, token): the causal rows of one head are unequal
	// in cost, so the split is over tokens of all sequences interleaved.
	d.parallel(NH*T, 32, func(lo, hi int) {
		p := make([]float64, 0, 256)
		acc := make([]float64, HS)
		for task := lo; task < hi; task++ {
			h, t := task/T, task%T
			s := seqStart(seqs, t)
			kv := h / (NH / KVH)
			q := x[t*a.W+a.qOff+h*HS:][:HS]
			p = p[:0]
			m := math.Inf(-1)
			for j := s; j <= t; j++ {
				k := x[j*a.W+a.kOff+kv*HS:][:HS]
				v := float64(dot(q, k)) * scale
				p = append(p, v)
				m = math.Max(m, v)
			}
			var sum float64
			clear(acc)
			for jj, v := range p {
				e := math.Exp(v - m)
				sum += e
				vr := x[(s+jj)*a.W+a.vOff+kv*HS:][:HS]
				for c := range acc {
					acc[c] += e * float64(vr[c])
				}
			}
			or := o[t*NH*HS+h*HS:][:HS]
			for c := range or {
				or[c] = F(acc[c] / sum)
			}
			L[h*T+t] = F(m + math.Log(sum))
		}
	})
}

func (d *CPU[F]) AttentionBackward(dqkv, dout, out, lse, qkv Buffer, seqs []int32, NH, KVH, HS int) {
	dx, dy, o, L, x := buf[F](dqkv), buf[F](dout), buf[F](out), buf[F](lse), buf[F](qkv)
	a := newAttnDims(NH, KVH, HS)
	T := len(x) / a.W
	checkSeqs(seqs, T)
	clear(dx)
	scale := 1 / math.Sqrt(float64(HS))
	group := NH / KVH
	nseq := len(seqs) - 1
	// One task per (sequence, key-value head): it owns dk and dv of that
	// head in that sequence and dq of the query heads of its group.
	d.parallel(nseq*KVH, 1, func(lo, hi int) {
		dq, dk, dv := make([]float64, HS), make([]float64, 0), make([]float64, 0)
		for task := lo; task < hi; task++ {
			sq, kv := task/KVH, task%KVH
			s, e := int(seqs[sq]), int(seqs[sq+1])
			n := e - s
			dk, dv = resize(dk, n*HS), resize(dv, n*HS)
			for h := kv * group; h < (kv+1)*group; h++ {
				for t := s; t < e; t++ {
					q := x[t*a.W+a.qOff+h*HS:][:HS]
					g := dy[t*NH*HS+h*HS:][:HS]
					D := float64(dot(g, o[t*NH*HS+h*HS:][:HS]))
					lt := float64(L[h*T+t])
					clear(dq)
					for j := s; j <= t; j++ {
						k := x[j*a.W+a.kOff+kv*HS:][:HS]
						v := x[j*a.W+a.vOff+kv*HS:][:HS]
						pij := math.Exp(float64(dot(q, k))*scale - lt)
						dp := float64(dot(g, v))
						ds := pij * (dp - D) * scale
						dkj, dvj := dk[(j-s)*HS:][:HS], dv[(j-s)*HS:][:HS]
						for c := 0; c < HS; c++ {
							dq[c] += ds * float64(k[c])
							dkj[c] += ds * float64(q[c])
							dvj[c] += pij * float64(g[c])
						}
					}
					dqr := dx[t*a.W+a.qOff+h*HS:][:HS]
					for c := range dqr {
						dqr[c] = F(dq[c])
					}
				}
			}
			for t := s; t < e; t++ {
				dkr, dvr := dx[t*a.W+a.kOff+kv*HS:][:HS], dx[t*a.W+a.vOff+kv*HS:][:HS]
				for c := 0; c < HS; c++ {
					dkr[c] = F(dk[(t-s)*HS+c])
					dvr[c] = F(dv[(t-s)*HS+c])
				}
			}
		}
	})
}

func (d *CPU[F]) AttentionCached(out, qkv, kc, vc Buffer, slots, pos0, lens []int32, maxLen, NH, KVH, HS int) {
	o, x, K, V := buf[F](out), buf[F](qkv), buf[F](kc), buf[F](vc)
	a := newAttnDims(NH, KVH, HS)
	T := len(x) / a.W
	kvw := KVH * HS
	starts := make([]int32, len(lens)+1)
	for j, n := range lens {
		starts[j+1] = starts[j] + n
		if int(pos0[j]+n) > maxLen {
			panic(fmt.Sprintf("model: chunk %d reaches position %d past the KV cache length %d", j, pos0[j]+n, maxLen))
		}
	}
	checkSeqs(starts, T)
	// Write this step's keys and values into the cache first.
	for j := range lens {
		base := int(slots[j]) * maxLen * kvw
		for i := 0; i < int(lens[j]); i++ {
			t, p := int(starts[j])+i, int(pos0[j])+i
			copy(K[base+p*kvw:][:kvw], x[t*a.W+a.kOff:][:kvw])
			copy(V[base+p*kvw:][:kvw], x[t*a.W+a.vOff:][:kvw])
		}
	}
	scale := 1 / math.Sqrt(float64(HS))
	d.parallel(NH*T, 4, func(lo, hi int) {
		p := make([]float64, 0, 256)
		acc := make([]float64, HS)
		for task := lo; task < hi; task++ {
			h, t := task/T, task%T
			j := seqStart32(starts, t)
			base := int(slots[j]) * maxLen * kvw
			last := int(pos0[j]) + t - int(starts[j]) // this row's own position
			kv := h / (NH / KVH)
			q := x[t*a.W+a.qOff+h*HS:][:HS]
			p = p[:0]
			m := math.Inf(-1)
			for i := 0; i <= last; i++ {
				v := float64(dot(q, K[base+i*kvw+kv*HS:][:HS])) * scale
				p = append(p, v)
				m = math.Max(m, v)
			}
			var sum float64
			clear(acc)
			for i, v := range p {
				e := math.Exp(v - m)
				sum += e
				vr := V[base+i*kvw+kv*HS:][:HS]
				for c := range acc {
					acc[c] += e * float64(vr[c])
				}
			}
			or := o[t*NH*HS+h*HS:][:HS]
			for c := range or {
				or[c] = F(acc[c] / sum)
			}
		}
	})
}

// seqStart returns the start offset of the sequence holding token t.
func seqStart(seqs []int32, t int) int { return int(seqs[seqStart32(seqs, t)]) }

// seqStart32 returns the index j with seqs[j] <= t < seqs[j+1].
func seqStart32(seqs []int32, t int) int {
	lo, hi := 0, len(seqs)-1
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if int(seqs[mid]) <= t {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

func dot[F Float](a, b []F) F {
	var s0, s1, s2, s3 F
	n := len(a)
	b = b[:n]
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func resize(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	s = s[:n]
	clear(s)
	return s
}
