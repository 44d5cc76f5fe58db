package cpu

import (
	"fmt"
	"math"
	"sync"

	"github.com/r1go/r1go/model"
)

// Causal grouped-query attention over packed sequences. Query head h reads
// key-value head h/(NH/KVH), as Hugging Face's repeat_kv does. Work runs in
// blocks of query rows as matmuls against the keys the block can see; the
// forward keeps only the log-normaliser of each softmax row and the backward
// recomputes the probabilities from it, flash-attention style, so no
// [T, T] matrix is ever stored.

type attnDims struct{ NH, KVH, HS, W, qOff, kOff, vOff int }

func newAttnDims(NH, KVH, HS int) attnDims {
	if NH%KVH != 0 {
		panic(fmt.Sprintf("cpu: %d query heads are not a multiple of %d key-value heads", NH, KVH))
	}
	return attnDims{NH: NH, KVH: KVH, HS: HS, W: (NH + 2*KVH) * HS, qOff: 0, kOff: NH * HS, vOff: (NH + KVH) * HS}
}

func checkSeqs(seqs []int32, T int) {
	if len(seqs) < 2 || seqs[0] != 0 || int(seqs[len(seqs)-1]) != T {
		panic(fmt.Sprintf("cpu: sequence offsets %v do not cover %d tokens", seqs, T))
	}
}

// attnBlock is the number of query rows one attention task handles.
const attnBlock = 64

func (d *Device[F]) Attention(out, lse, qkv model.Buffer, seqs []int32, NH, KVH, HS int) {
	o, L, x := buf[F](out), buf[F](lse), buf[F](qkv)
	a := newAttnDims(NH, KVH, HS)
	T := len(x) / a.W
	checkSeqs(seqs, T)
	scale := float32(1 / math.Sqrt(float64(HS)))
	type task struct{ h, s0, t0, nq int }
	var tasks []task
	for sq := 0; sq+1 < len(seqs); sq++ {
		s0, e := int(seqs[sq]), int(seqs[sq+1])
		for h := 0; h < NH; h++ {
			for t0 := s0; t0 < e; t0 += attnBlock {
				tasks = append(tasks, task{h, s0, t0, min(attnBlock, e-t0)})
			}
		}
	}
	// Tasks differ in cost (later blocks see more keys), so workers pull
	// them one at a time.
	d.dynamic(len(tasks), func(i int, scratch *[]F) {
		tk := tasks[i]
		kv := tk.h / (NH / KVH)
		nk := tk.t0 + tk.nq - tk.s0
		S := grow(scratch, tk.nq*nk)
		sc := getRow[F](nk) // e^x's arguments (expInto writes S's row)
		defer putRow(sc)
		gemm1(false, true, tk.nq, nk, HS, scale, x[tk.t0*a.W+a.qOff+tk.h*HS:], a.W, x[tk.s0*a.W+a.kOff+kv*HS:], a.W, 0, S, nk)
		for i := 0; i < tk.nq; i++ {
			row := S[i*nk : (i+1)*nk]
			valid := tk.t0 + i - tk.s0 + 1 // keys s0..t0+i
			m := row[0]
			for _, v := range row[:valid] {
				m = max(m, v)
			}
			arg := (*sc)[:valid]
			for j, v := range row[:valid] {
				arg[j] = v - m
			}
			expInto(row[:valid], arg)
			var sum float64
			for _, e := range row[:valid] {
				sum += float64(e)
			}
			clear(row[valid:])
			inv := F(1 / sum)
			for j := range valid {
				row[j] *= inv
			}
			L[tk.h*T+tk.t0+i] = F(float64(m) + math.Log(sum))
		}
		gemm1(false, false, tk.nq, HS, nk, 1, S, nk, x[tk.s0*a.W+a.vOff+kv*HS:], a.W, 0, o[tk.t0*NH*HS+tk.h*HS:], NH*HS)
	})
}

// AttentionBackward recomputes each block's probabilities P = e^(S − lse)
// and forms dV += Pᵀ·dO, dS = P ⊙ (dO·Vᵀ − rowsum(dO ⊙ O)), dQ = dS·K and
// dK += dSᵀ·Q (the softmax scale folded into dS). A task owns one
// key-value head of one sequence, so dK and dV have a single writer.
func (d *Device[F]) AttentionBackward(dqkv, dout, out, lse, qkv model.Buffer, seqs []int32, NH, KVH, HS int) {
	dx, dy, o, L, x := buf[F](dqkv), buf[F](dout), buf[F](out), buf[F](lse), buf[F](qkv)
	a := newAttnDims(NH, KVH, HS)
	T := len(x) / a.W
	checkSeqs(seqs, T)
	clear(dx)
	scale := float32(1 / math.Sqrt(float64(HS)))
	group := NH / KVH
	nseq := len(seqs) - 1
	QW := NH * HS
	d.dynamic(nseq*KVH, func(task int, scratch *[]F) {
		sq, kv := task/KVH, task%KVH
		s0, e := int(seqs[sq]), int(seqs[sq+1])
		for h := kv * group; h < (kv+1)*group; h++ {
			for t0 := s0; t0 < e; t0 += attnBlock {
				nq := min(attnBlock, e-t0)
				nk := t0 + nq - s0
				buf2 := grow(scratch, 2*nq*nk)
				sc := getRow[F](nk)
				P, dS := buf2[:nq*nk], buf2[nq*nk:]
				q := x[t0*a.W+a.qOff+h*HS:]
				k := x[s0*a.W+a.kOff+kv*HS:]
				v := x[s0*a.W+a.vOff+kv*HS:]
				g := dy[t0*QW+h*HS:]
				gemm1(false, true, nq, nk, HS, scale, q, a.W, k, a.W, 0, P, nk)
				gemm1(false, true, nq, nk, HS, 1, g, QW, v, a.W, 0, dS, nk)
				for i := 0; i < nq; i++ {
					t := t0 + i
					valid := t - s0 + 1
					lt := L[h*T+t]
					D := dot(dy[t*QW+h*HS:][:HS], o[t*QW+h*HS:][:HS])
					pr, dr := P[i*nk:(i+1)*nk], dS[i*nk:(i+1)*nk]
					arg := (*sc)[:valid]
					for j, v := range pr[:valid] {
						arg[j] = v - lt
					}
					expInto(pr[:valid], arg)
					for j, p := range pr[:valid] {
						dr[j] = p * (dr[j] - D) * F(scale)
					}
					clear(pr[valid:])
					clear(dr[valid:])
				}
				gemm1(false, false, nq, HS, nk, 1, dS, nk, k, a.W, 0, dx[t0*a.W+a.qOff+h*HS:], a.W)
				gemm1(true, false, nk, HS, nq, 1, dS, nk, q, a.W, 1, dx[s0*a.W+a.kOff+kv*HS:], a.W)
				gemm1(true, false, nk, HS, nq, 1, P, nk, g, QW, 1, dx[s0*a.W+a.vOff+kv*HS:], a.W)
				putRow(sc)
			}
		}
	})
}

// AttentionCached runs AddBias and RoPE over qkv first when theta > 0,
// each row at its position pos0[j]+i: the ops a model would run before it.
func (d *Device[F]) AttentionCached(out, qkv, bias, kc, vc model.Buffer, slots, pos0, lens []int32, maxLen, NH, KVH, HS int, theta float64) {
	if theta > 0 {
		a := newAttnDims(NH, KVH, HS)
		T := qkv.Len() / a.W
		pos := make([]int32, 0, T)
		for j, n := range lens {
			for i := range n {
				pos = append(pos, pos0[j]+i)
			}
		}
		if bias != nil {
			d.AddBias(qkv, a.W, bias, T, a.W)
		}
		d.RoPE(qkv, a.W, 0, pos, NH, HS, theta)
		d.RoPE(qkv, a.W, a.kOff, pos, KVH, HS, theta)
	} else if bias != nil {
		panic(fmt.Sprintf("cpu: AttentionCached with a bias and rope theta %g: the bias comes with the rotation", theta))
	}
	d.attentionCached(out, qkv, kc, vc, slots, pos0, lens, maxLen, NH, KVH, HS)
}

func (d *Device[F]) attentionCached(out, qkv, kc, vc model.Buffer, slots, pos0, lens []int32, maxLen, NH, KVH, HS int) {
	defer d.timed(opAttention)()
	o, x := buf[F](out), buf[F](qkv)
	a := newAttnDims(NH, KVH, HS)
	T := len(x) / a.W
	kvw := KVH * HS
	starts := make([]int32, len(lens)+1)
	for j, n := range lens {
		starts[j+1] = starts[j] + n
		if int(pos0[j]+n) > maxLen {
			panic(fmt.Sprintf("cpu: chunk %d reaches position %d past the KV cache length %d", j, pos0[j]+n, maxLen))
		}
	}
	checkSeqs(starts, T)
	if K16, V16, ok := bf16Cache(kc, vc); ok {
		attendCachedBF16(d, o, x, K16, V16, starts, slots, pos0, lens, maxLen, NH, KVH, HS)
		return
	}
	K, V := buf[F](kc), buf[F](vc)
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
	if _, is32 := any(o).([]float32); is32 && attn32 != nil && !attnNoVector && HS%16 == 0 {
		// The heads that share a KV head together, eight at a time: each
		// cached key and value row is read once for all of them.
		o32, x32 := any(o).([]float32), any(x).([]float32)
		K32, V32 := any(K).([]float32), any(V).([]float32)
		groupTasks(d, T, NH, KVH, HS, maxLen, starts, slots, pos0, func(w *groupScratch, t, h0, nh, off, n int) {
			attendGroup32(o32[t*NH*HS+h0*HS:][:nh*HS], x32[t*a.W+a.qOff+h0*HS:][:nh*HS], K32[off:], V32[off:], kvw, n, nh, HS, scale, w)
		})
		return
	}
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
				e := float64(expF(F(v - m)))
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

// groupTasks runs fn on d's threads for each row t of a cached step and
// each group of up to eight query heads sharing a KV head (h0 its first
// head, nh how many), with pooled scratch w, off the cache offset of the
// group's KV head at the row's slot's first position, and n the positions
// the row attends to (its own included).
func groupTasks[F Float](d *Device[F], T, NH, KVH, HS, maxLen int, starts, slots, pos0 []int32, fn func(w *groupScratch, t, h0, nh, off, n int)) {
	G := NH / KVH
	subs := (G + attnGroup - 1) / attnGroup
	kvw := KVH * HS
	d.parallel(T*KVH*subs, 1, func(lo, hi int) {
		w, _ := groupScratches.Get().(*groupScratch)
		if w == nil {
			w = new(groupScratch)
		}
		defer groupScratches.Put(w)
		for task := lo; task < hi; task++ {
			t, kv, sub := task/(KVH*subs), task/subs%KVH, task%subs
			j := seqStart32(starts, t)
			last := int(pos0[j]) + t - int(starts[j]) // this row's own position
			fn(w, t, kv*G+sub*attnGroup, min(attnGroup, G-sub*attnGroup), int(slots[j])*maxLen*kvw+kv*HS, last+1)
		}
	})
}

// attnNoVector makes AttentionCached take its element-by-element loops on
// every CPU: the tests' and benchmarks' reference.
var attnNoVector bool

// attnGroup is the grouped kernels' width: query heads per pass.
const attnGroup = 8

// groupScratch is a task's scratch for attendGroup32 and attendGroupBF16.
type groupScratch struct {
	qp, sc, arg, ex, acc32 []float32
	p, acc                 []float64
}

// groupScratches keeps the scratch between calls: a decode step calls
// AttentionCached once per layer, and fresh scratch each time was a
// sixth of the attention's time, in zeroing.
var groupScratches sync.Pool

// attendGroup32 is AttentionCached on the float32 device for one row and
// nh ≤ 8 query heads sharing a KV head (q and out: nh rows of HS), with
// the vector kernels of the tier (attn32: AVX-512 or AVX2): the scores of
// every head against the n cached keys (dots), their softmax in float64
// with the float32 exp (scores, args, weights: a vector holds the heads of
// one key), and the weighted sums of the value rows in float64 (axpy). Per
// head the arithmetic, and its order, is the element-by-element loop's in
// AttentionCached, so the result is the same bits; each key and value row
// is read once for the group instead of once per head.
func attendGroup32(out, q, k, v []float32, kvw, n, nh, HS int, scale float64, w *groupScratch) {
	const G = attnGroup
	kern := attn32
	chunks := HS / 4
	_ = k[(n-1)*kvw+HS-1]
	_ = v[(n-1)*kvw+HS-1]
	qp := grow(&w.qp, chunks*4*G)
	kern.packQ(qp, q, nh, HS)
	sc := grow(&w.sc, G*n)
	kern.dots(&qp[0], &k[0], uintptr(kvw)*4, n, chunks, &sc[0], &v[0])
	p, sum := softmaxGroup(w, sc, n, scale)
	acc := grow(&w.acc, G*HS)
	clear(acc)
	kern.axpy(&acc[0], &v[0], uintptr(kvw)*4, &p[0], n, HS, nh)
	for h := 0; h < nh; h++ {
		for c := 0; c < HS; c++ {
			out[h*HS+c] = float32(acc[h*HS+c] / sum[h])
		}
	}
}

// softmaxGroup is attendGroup32's softmax of the scores sc [n][8]
// (attn32's scores, args and weights kernels, exp32Into between them):
// the exps in float64 (p), each head's sum.
func softmaxGroup(w *groupScratch, sc []float32, n int, scale float64) (p []float64, sum [attnGroup]float64) {
	const G = attnGroup
	p = grow(&w.p, G*n)
	arg := grow(&w.arg, G*n)
	ex := grow(&w.ex, G*n)
	var m [G]float64
	for h := range m {
		m[h] = math.Inf(-1)
	}
	if kern := attn32; !kern.scores(&sc[0], &p[0], n, scale, &m) {
		kern.args(&p[0], &arg[0], n, &m)
		exp32Into(ex, arg)
		kern.weights(&ex[0], &p[0], n, &sum)
	} else {
		// A NaN score: the loops, whose max keeps the builtin's NaN rules.
		softmaxGroupLoops(sc, p, arg, ex, n, scale, &m, &sum)
	}
	return p, sum
}

// softmaxGroupLoops is attendGroup32's softmax element by element (the
// vector kernels' reference, and their fallback when a score is NaN):
// p = score·scale, m its largest per head, p = e^(p − m) through the
// float32 exp, sum their sum per head in order (m and sum are set, not
// added to).
func softmaxGroupLoops(sc []float32, p []float64, arg, ex []float32, n int, scale float64, m, sum *[attnGroup]float64) {
	const G = attnGroup
	for h := range G {
		m[h], sum[h] = math.Inf(-1), 0
	}
	for i := 0; i < n; i++ {
		for h := 0; h < G; h++ {
			x := float64(sc[i*G+h]) * scale
			p[i*G+h] = x
			m[h] = max(m[h], x) // the builtin: math.Max's rules, inlined
		}
	}
	for i := 0; i < n; i++ {
		for h := 0; h < G; h++ {
			arg[i*G+h] = float32(p[i*G+h] - m[h])
		}
	}
	exp32Into(ex, arg)
	for i := 0; i < n; i++ {
		for h := 0; h < G; h++ {
			e := float64(ex[i*G+h])
			p[i*G+h] = e
			sum[h] += e
		}
	}
}

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

// grow returns (*s)[:n], reallocating when the capacity is short.
func grow[F Float](s *[]F, n int) []F {
	if cap(*s) < n {
		*s = make([]F, n)
	}
	return (*s)[:n]
}
