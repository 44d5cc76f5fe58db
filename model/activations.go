package model

// activations is the arena of one Forward of T tokens and its Backward:
// one device allocation cut into named views. With saved set every layer
// has its own views; otherwise all layers share one set (scoring, or
// recomputation in the backward) and only the residuals are per layer.
type activations struct {
	T, cap int
	saved  bool
	arena  Buffer

	// On a device with compute storage (ComputeStorage: bf16 on CUDA under
	// mixed precision) the residual stream, xs and each layer's xmid, is a
	// second arena in it, as PyTorch autocast keeps the hidden states in
	// bf16; the ops reading it widen it and accumulate in float32. resid
	// is nil on other devices (the CPU), whose layout is unchanged.
	resid Buffer
	rcap  int

	xs     []Buffer // [L+1][T, C] residual stream: input of layer l, x(L) the last output
	layers []layerActs
	tmp    Buffer // [T, C] branch output before the residual add; scratch in the backward
	lnf    Buffer // [T, C] final RMSNorm output
	rstdf  Buffer // [T]

	logprob, entropy, lseV Buffer // [T] LM head outputs and its saved log-normaliser
	values                 Buffer // [T] value head output

	// Backward scratch.
	dx       Buffer // [T, C] gradient of the residual stream
	dln      Buffer // [T, C]
	dqkv     Buffer // [T, QKV]
	datt     Buffer // [T, Q]
	dgu      Buffer // [T, 2I]
	dact     Buffer // [T, I]
	dlogprob Buffer // [T]
	dentropy Buffer // [T]
	dvalues  Buffer // [T]

	pos, targets []int32 // [T] host-side positions and next-token targets

	// Per-head q/k norm (Qwen3) only: two [T, QKV] scratch buffers and the
	// row permutations between qkv's interleaved head rows (per token:
	// NH q heads, KVH k heads, KVH v heads, HS wide each) and the blocked
	// order (all q head rows, then all k, then all v) in which the q rows
	// and the k rows are each contiguous for one RMSNorm call.
	qkn, qkn2          Buffer
	toBlocked, toInter []int32
}

// layerActs are what one layer's backward reads.
type layerActs struct {
	ln1   Buffer // [T, C]
	rstd1 Buffer // [T]
	qkv   Buffer // [T, QKV] after bias and RoPE
	att   Buffer // [T, Q]
	lse   Buffer // [NH, T]
	xmid  Buffer // [T, C] residual after attention
	ln2   Buffer // [T, C]
	rstd2 Buffer // [T]
	gu    Buffer // [T, 2I]
	act   Buffer // [T, I]

	qkraw        Buffer // [T, QKV] q|k|v before the per-head norm, blocked order (Qwen3)
	rstdq, rstdk Buffer // [T·NH], [T·KVH] the per-head norms' saved statistics
}

func layerActSize(d dims, T int) int {
	n := T*d.C*3 + 2*T + T*d.QKV + T*d.Q + d.NH*T + T*2*d.I + T*d.I
	if d.qkNorm {
		n += T*d.QKV + T*d.NH + T*d.KVH
	}
	return n
}

// qkNormScratch is the size of the shared per-head norm scratch.
func qkNormScratch(d dims, T int) int {
	if !d.qkNorm {
		return 0
	}
	return 2 * T * d.QKV
}

// headPermutations returns the row gathers, as Embedding ids, between qkv's
// interleaved head rows and the blocked order: Embedding(blocked, toBlocked,
// qkv, HS) and Embedding(qkv, toInter, blocked, HS) convert one into the
// other. A gather is the one strided copy every Device already has.
func headPermutations(d dims, T int) (toBlocked, toInter []int32) {
	per := d.NH + 2*d.KVH
	toInter, toBlocked = make([]int32, T*per), make([]int32, T*per)
	for t := 0; t < T; t++ {
		for j := 0; j < per; j++ {
			var b int
			switch {
			case j < d.NH:
				b = t*d.NH + j
			case j < d.NH+d.KVH:
				b = T*d.NH + t*d.KVH + j - d.NH
			default:
				b = T*(d.NH+d.KVH) + t*d.KVH + j - d.NH - d.KVH
			}
			r := t*per + j
			toInter[r], toBlocked[b] = int32(b), int32(r)
		}
	}
	return toBlocked, toInter
}

// x is the residual stream entering layer l. Without a backward to feed,
// two buffers take turns (layer l reads one and writes the other), so a
// scoring or decoding arena holds 2·T·C residuals instead of (L+1)·T·C.
func (a *activations) x(l int) Buffer { return a.xs[l%len(a.xs)] }

func (a *activations) layer(l int) layerActs {
	if a.saved {
		return a.layers[l]
	}
	return a.layers[0]
}

// ensureActivations returns an arena for T tokens, reusing old when it is
// large enough and laid out the same way (views are re-cut for the new T).
// Every residual is kept when residuals is set (a training forward, whose
// backward reads them); otherwise two alternate.
func ensureActivations(old *activations, dev Device, d dims, T int, saved, residuals bool) *activations {
	nl := 1
	if saved {
		nl = d.L
	}
	nx, tb := 2, 0 // tb: rows of backward scratch, none without a backward
	if residuals || d.L+1 < 2 {
		nx = d.L + 1
	}
	if residuals {
		tb = T
	}
	size := nx*T*d.C + nl*layerActSize(d, T) + // residuals and layers
		T*d.C*2 + T + // tmp, lnf, rstdf
		4*T + // head outputs
		tb*d.C*2 + tb*d.QKV + tb*d.Q + tb*2*d.I + tb*d.I + 3*tb + // backward scratch
		qkNormScratch(d, T)
	cs, split := dev.(ComputeStorage)
	rsize := 0
	if split {
		rsize = nx*T*d.C + nl*T*d.C // xs and each layer's xmid
		size -= rsize
	}
	a := old
	if a == nil || a.cap < size || a.rcap < rsize {
		if a != nil {
			a.free(dev)
		}
		a = &activations{arena: dev.Alloc(size), cap: size}
		if split {
			a.resid, a.rcap = cs.AllocCompute(rsize), rsize
		}
	}
	a.T, a.saved = T, saved
	off, roff := 0, 0
	take := func(n int) Buffer { b := a.arena.Slice(off, n); off += n; return b }
	takeR := take
	if split {
		takeR = func(n int) Buffer { b := a.resid.Slice(roff, n); roff += n; return b }
	}
	a.xs = a.xs[:0]
	for l := 0; l < nx; l++ {
		a.xs = append(a.xs, takeR(T*d.C))
	}
	a.layers = a.layers[:0]
	for l := 0; l < nl; l++ {
		a.layers = append(a.layers, layerActs{
			ln1: take(T * d.C), rstd1: take(T), qkv: take(T * d.QKV), att: take(T * d.Q),
			lse: take(d.NH * T), xmid: takeR(T * d.C), ln2: take(T * d.C), rstd2: take(T),
			gu: take(T * 2 * d.I), act: take(T * d.I),
		})
		if d.qkNorm {
			s := &a.layers[l]
			s.qkraw, s.rstdq, s.rstdk = take(T*d.QKV), take(T*d.NH), take(T*d.KVH)
		}
	}
	a.tmp, a.lnf, a.rstdf = take(T*d.C), take(T*d.C), take(T)
	a.logprob, a.entropy, a.lseV, a.values = take(T), take(T), take(T), take(T)
	a.dx, a.dln, a.dqkv, a.datt = take(tb*d.C), take(tb*d.C), take(tb*d.QKV), take(tb*d.Q)
	a.dgu, a.dact = take(tb*2*d.I), take(tb*d.I)
	a.dlogprob, a.dentropy, a.dvalues = take(tb), take(tb), take(tb)
	if d.qkNorm {
		a.qkn, a.qkn2 = take(T*d.QKV), take(T*d.QKV)
		if len(a.toInter) != T*(d.NH+2*d.KVH) {
			a.toBlocked, a.toInter = headPermutations(d, T)
		}
	}
	if off != size || roff != rsize {
		panic("model: activation arena size and views disagree")
	}
	return a
}

// free releases the arena and the residual arena beside it.
func (a *activations) free(dev Device) {
	dev.Free(a.arena)
	if a.resid != nil {
		dev.Free(a.resid)
	}
}
