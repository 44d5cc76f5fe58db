package model

// activations is the arena of one Forward of T tokens and its Backward:
// one device allocation cut into named views. Layers [0, nsaved) have
// views of their own, saved for the backward; the others share one set
// (scoring, or recomputation in the backward), and only the residuals are
// per layer. nsaved is L when every layer is saved, 0 when none is.
type activations struct {
	T, cap int
	nsaved int
	live   int // the layer whose activations the shared set holds (-1: none)
	arena  Buffer
	logits Buffer // [T, V] a training forward's logits kept for the LM head's backward, or nil

	// On a device with compute storage (StoreCompute: bf16 on CUDA under
	// mixed precision) the residual stream (xs and each layer's xmid) and
	// every layer's tensors that feed a matmul or attention (ln1, qkv, att,
	// ln2, gu, act, Qwen3's qkraw) are a second arena in it, as PyTorch
	// autocast keeps hidden states and projections in bf16; the ops that
	// write them round once from float32, those that read them widen them
	// and accumulate in float32. The per-row statistics (rstd, lse), the
	// branch output tmp, the final norm lnf (the LM head's input: the loss
	// path stays float32), the head's outputs and all backward scratch
	// (gradients, Qwen3's per-head norm scratch) stay in the float32
	// arena. resid is nil on other devices (the CPU), whose layout is
	// unchanged. A grouped arena keeps its training residuals there too.
	resid Buffer
	rcap  int

	xs     []Buffer // [L+1][T, C] residual stream: input of layer l, x(L) the last output
	layers []layerActs
	tmp    Buffer // [T, C] branch output before the residual add; scratch in the backward
	lnf    Buffer // [T, C] final RMSNorm output
	rstdf  Buffer // [T]

	logprob, entropy, lseV Buffer // [T] LM head outputs and its saved log-normaliser
	values                 Buffer // [T] value head output

	// Backward scratch. On a device that rounds the gradients its matmuls
	// read (MixedPrecision) dgu is in compute storage, and dxc and dqkvc
	// are compute views of dx and dqkv, each rounded once where it is
	// written; elsewhere dgu is float32 and dxc, dqkvc are nil.
	dx       Buffer // [T, C] gradient of the residual stream
	dxc      Buffer // [T, C] dx in compute storage, or nil
	dln      Buffer // [T, C]
	dqkv     Buffer // [T, QKV]
	dqkvc    Buffer // [T, QKV] dqkv in compute storage, or nil
	datt     Buffer // [T, Q]
	dgu      Buffer // [T, 2I]
	dact     Buffer // [T, I]
	dlogprob Buffer // [T]
	dentropy Buffer // [T]
	dvalues  Buffer // [T]

	pos, targets []int32 // [T] host-side positions and next-token targets
	scored       []int32 // the batch's Scored rows, or nil: the head ran on every row
	stargets     []int32 // targets of the scored rows
	npos         []int32 // [T] -pos, RoPE's backward rotation (backPos), reused
	seqs         []int32 // sequence offsets of these rows, from 0 (the attention's)
	row0         int     // first row within the batch (keys LoRA dropout masks)

	// A grouped arena (a long batch of a large model: see groupTokens)
	// holds only what spans the whole batch (the residuals of a training
	// forward, the final norm, the head's outputs, the residual gradient);
	// grp is the arena of one group of sequences at a time, whose views
	// reach into this one's rows.
	grouped bool
	grp     *activations
	spans   []span // the groups of a grouped arena

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

// layerComputeSize is the part of layerActSize in compute storage under
// mixed precision: xmid, ln1, ln2, qkv, att, gu, act (and qkraw); the rest
// (rstd1, rstd2, lse, rstdq, rstdk) is float32 statistics.
func layerComputeSize(d dims, T int) int {
	n := T*d.C*3 + T*d.QKV + T*d.Q + T*2*d.I + T*d.I
	if d.qkNorm {
		n += T * d.QKV
	}
	return n
}

// gradViews says whether an arena on dev keeps activation gradients in
// compute storage (MixedPrecision while Mixed, with StoreCompute to hold
// them; RMSNormBackward writes the residual gradient's view).
func gradViews(dev Device) bool {
	mp, ok := dev.(MixedPrecision)
	return ok && Stores(dev, StoreCompute) && mp.Mixed()
}

// gradViewSize is the compute storage of gradViews for tb rows of
// backward scratch: dxc, dgu (moved from the float32 arena) and dqkvc.
func gradViewSize(d dims, tb int) int { return tb * (d.C + 2*d.I + d.QKV) }

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
	return a.layers[min(l, a.nsaved)]
}

// holds says whether layer l's activations are at hand for its backward:
// in its own saved views, or in the shared set, which the last layer that
// ran wrote (the forward's last layer, or the backward's last
// recomputation).
func (a *activations) holds(l int) bool { return l < a.nsaved || l == a.live }

// layerSets is how many sets of layer views an arena with nsaved saved
// layers of L holds: one per saved layer and one shared by the rest.
func layerSets(nsaved, L int) int {
	if nsaved >= L {
		return L
	}
	return nsaved + 1
}

// ActivationCut is the shape of one activation arena: T rows, Residuals
// [T, C] residual buffers, the views of Saved layers saved for the
// backward (and one set shared by the others, if any), BackwardRows rows
// of backward scratch, and a training forward's logits [T, V] when
// Logits is set. A Grouped cut is the whole batch's arena of a grouped
// Forward (see groupTokens): its residuals, final norm, head outputs and
// residual gradient, and no layer views or layer scratch of its own.
type ActivationCut struct {
	T, Residuals, Saved, BackwardRows int
	Logits, Grouped                   bool
}

// forwardCut is the cut of a whole Forward of T tokens with k saved (a
// training one with train): every residual is kept when a backward reads
// them, otherwise two alternate.
func forwardCut(d dims, T int, k keep, train bool) ActivationCut {
	c := ActivationCut{T: T, Residuals: 2, Saved: k.layers, Logits: k.logits}
	if train || d.L+1 < 2 {
		c.Residuals = d.L + 1
	}
	if train {
		c.BackwardRows = T
	}
	return c
}

// groupCut is the cut of a group arena of n rows: with train its
// residuals are views into the whole batch's, its backward scratch its own.
func groupCut(n int, train bool) ActivationCut {
	if train {
		return ActivationCut{T: n, BackwardRows: n}
	}
	return ActivationCut{T: n, Residuals: 2}
}

// groupedCut is the cut of the whole batch's arena of a grouped Forward of
// T tokens.
func groupedCut(d dims, T int, train bool) ActivationCut {
	if train {
		return ActivationCut{T: T, Residuals: d.L + 1, BackwardRows: T, Grouped: true}
	}
	return ActivationCut{T: T, Grouped: true}
}

// ActivationLayout is the number of values of an arena cut as c for cfg,
// as Forward lays it out: f32 in the float32 arena and comp in compute
// storage, on a device with compute storage (compute: StoreCompute) and
// gradient views there (views: MixedPrecision while Mixed; see
// gradViews). model/plan sizes a run's activations with it.
func ActivationLayout(cfg *Config, c ActivationCut, compute, views bool) (f32, comp int) {
	return activationLayout(arenaDims(cfg), c, compute, views)
}

// GroupTokens is groupTokens for cfg: how many rows one group of a
// grouped Forward of T tokens may hold, 0 when the batch runs whole.
func GroupTokens(cfg *Config, T int, train bool) int { return groupTokens(arenaDims(cfg), T, train) }

// arenaDims are the sizes of cfg that the activation arenas depend on.
func arenaDims(cfg *Config) dims {
	d := dims{L: cfg.NumHiddenLayers, C: cfg.HiddenSize, V: cfg.VocabSize, I: cfg.IntermediateSize,
		NH: cfg.NumAttentionHeads, KVH: cfg.NumKeyValueHeads, HS: cfg.HeadDim(), qkNorm: cfg.QKNorm()}
	d.Q, d.KV = d.NH*d.HS, d.KVH*d.HS
	d.QKV = d.Q + 2*d.KV
	return d
}

// activationLayout is ActivationLayout for the model's dims: the float32
// arena's size and the compute arena's (0 with compute unset).
func activationLayout(d dims, c ActivationCut, compute, views bool) (size, rsize int) {
	T, tb, nx := c.T, c.BackwardRows, c.Residuals
	if c.Grouped {
		size = nx*T*d.C + T*d.C + T + 4*T + tb*d.C + 3*tb // residuals, lnf, rstdf, head outputs, dx, head gradients
		if compute {
			rsize = nx * T * d.C
			size -= rsize
		}
		if views {
			rsize += tb * d.C // dxc beside dx
		}
		return size, rsize
	}
	logits := 0
	if c.Logits {
		logits = T * d.V
	}
	nl := layerSets(c.Saved, d.L)
	size = nx*T*d.C + nl*layerActSize(d, T) + // residuals and layers
		T*d.C*2 + T + // tmp, lnf, rstdf
		4*T + // head outputs
		tb*d.C*2 + tb*d.QKV + tb*d.Q + tb*2*d.I + tb*d.I + 3*tb + // backward scratch
		qkNormScratch(d, T) + logits
	if compute {
		rsize = nx*T*d.C + nl*layerComputeSize(d, T)
		size -= rsize
	}
	if views {
		rsize += gradViewSize(d, tb)
		size -= tb * 2 * d.I // dgu moves into compute storage
	}
	return size, rsize
}

// cutActivations lays out an arena cut as c (not Grouped), reusing old
// when it is large enough and laid out the same way (views are re-cut for
// the new T).
func cutActivations(old *activations, dev Device, d dims, c ActivationCut) *activations {
	T, nx, tb, nl := c.T, c.Residuals, c.BackwardRows, layerSets(c.Saved, d.L)
	// Under mixed precision (StoreCompute) the residual stream and the
	// layers' matmul and attention tensors live in an arena of their own
	// in the device's compute dtype.
	split := Stores(dev, StoreCompute)
	views := gradViews(dev)
	size, rsize := activationLayout(d, c, split, views)
	a := old
	if a == nil || a.cap < size || a.rcap < rsize || a.grouped {
		if a != nil {
			a.free(dev)
		}
		a = &activations{arena: dev.Alloc(size), cap: size}
		if split {
			a.resid, _ = AllocAs(dev, rsize, StoreCompute)
			a.rcap = rsize
		}
	}
	a.T, a.nsaved, a.live = T, c.Saved, -1
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
			ln1: takeR(T * d.C), rstd1: take(T), qkv: takeR(T * d.QKV), att: takeR(T * d.Q),
			lse: take(d.NH * T), xmid: takeR(T * d.C), ln2: takeR(T * d.C), rstd2: take(T),
			gu: takeR(T * 2 * d.I), act: takeR(T * d.I),
		})
		if d.qkNorm {
			s := &a.layers[l]
			s.qkraw, s.rstdq, s.rstdk = takeR(T*d.QKV), take(T*d.NH), take(T*d.KVH)
		}
	}
	a.tmp, a.lnf, a.rstdf = take(T*d.C), take(T*d.C), take(T)
	a.logprob, a.entropy, a.lseV, a.values = take(T), take(T), take(T), take(T)
	a.dx, a.dln, a.dqkv, a.datt = take(tb*d.C), take(tb*d.C), take(tb*d.QKV), take(tb*d.Q)
	a.dxc, a.dqkvc = nil, nil
	if views {
		a.dgu, a.dact = takeR(tb*2*d.I), take(tb*d.I)
		a.dxc, a.dqkvc = takeR(tb*d.C), takeR(tb*d.QKV)
	} else {
		a.dgu, a.dact = take(tb*2*d.I), take(tb*d.I)
	}
	a.dlogprob, a.dentropy, a.dvalues = take(tb), take(tb), take(tb)
	if d.qkNorm {
		a.qkn, a.qkn2 = take(T*d.QKV), take(T*d.QKV)
		if len(a.toInter) != T*(d.NH+2*d.KVH) {
			a.toBlocked, a.toInter = headPermutations(d, T)
		}
	}
	a.logits = nil
	if c.Logits {
		a.logits = take(T * d.V)
	}
	if off != size || roff != rsize {
		panic("model: activation arena size and views disagree")
	}
	return a
}

// ActivationValues is how many float values the activation arenas of a
// Forward of b hold (train: a training forward, with its backward's
// scratch), by the same rules as Forward: as many layers saved as fit the
// bound (SaveBytes or autoRecomputeBytes; savedLayers) unless Recompute is
// on; with none saved, the residuals and, for a long batch, one group of
// sequences' layer and scratch at a time.
// Times 4 it is the bytes on the CPU; the memory plan of a run adds it.
func (m *Model) ActivationValues(b Batch, train bool) int {
	d, T := m.d, len(b.Tokens)
	k := m.keeps(T, train)
	if maxT := groupTokens(d, T, train); k.layers == 0 && len(b.Seqs) > 2 && maxT > 0 {
		big := 0
		for _, g := range groupSpans(b.Seqs, maxT) {
			big = max(big, g.t1-g.t0)
		}
		whole, _ := activationLayout(d, groupedCut(d, T, train), false, false)
		group, _ := activationLayout(d, groupCut(big, train), false, false)
		return whole + group
	}
	n, _ := activationLayout(d, forwardCut(d, T, k, train), false, false)
	return n
}

// free releases the arena, its group arena and the residual arena beside
// it.
func (a *activations) free(dev Device) {
	if a.grp != nil {
		a.grp.free(dev)
		a.grp = nil
	}
	dev.Free(a.arena)
	if a.resid != nil {
		dev.Free(a.resid)
		a.resid = nil
	}
}

// GroupBytes bounds the float32 bytes of one group's layer activations and
// backward scratch in a grouped forward or backward (see groupTokens).
// Tests lower it so that small batches run grouped (package cuda's too).
var GroupBytes = 64 << 20

// groupTokens is how many rows one group may hold when a forward of T
// tokens does not save every layer (scoring, or training with
// recomputation): the layer activations and the backward scratch exist
// for one group of whole sequences at a time, the layers run group by
// group, and only the residual stream of the whole batch is kept (for a
// training forward). 0 means the batch runs whole. A 0.5B model's layer
// and backward scratch take 150 KiB per token, so an 8,192-token
// micro-batch runs in groups of ≤ 430 tokens, keeping 1.2 GiB of scratch
// down to 64 MiB. Small models and short batches stay whole, as before
// (the same operations on the same rows).
func groupTokens(d dims, T int, train bool) int {
	per := layerActSize(d, 1) + 2*d.C + qkNormScratch(d, 1)
	if train {
		per += 2*d.C + d.QKV + d.Q + 3*d.I
	}
	if T*per*4 <= GroupBytes {
		return 0
	}
	return max(1, GroupBytes/(per*4))
}

// MinGroupRows is the fewest rows a group has (unless the batch has
// fewer): the matrix products of fewer rows take other kernels (dot
// products without packing, in package model/cpu/gemm), whose sums round
// differently; from this many rows on, a row's results do not depend on
// the rows beside it, so grouping a scoring forward changes no bit.
const MinGroupRows = 16

// span is a group: rows [t0, t1) of the batch, whole sequences, with
// their offsets counted from t0.
type span struct {
	t0, t1 int
	seqs   []int32
}

// groupSpans cuts the batch's sequences into groups of at most maxT
// tokens (a longer sequence forms a group alone) and at least MinGroupRows
// (short sequences join their neighbours; a short last group joins the one
// before it).
func groupSpans(seqs []int32, maxT int) []span {
	var out []span
	n := len(seqs) - 1
	for i := 0; i < n; {
		j := i + 1
		for j < n && (int(seqs[j+1]-seqs[i]) <= maxT || int(seqs[j]-seqs[i]) < MinGroupRows) {
			j++
		}
		if j < n && int(seqs[n]-seqs[j]) < MinGroupRows {
			j = n
		}
		g := span{t0: int(seqs[i]), t1: int(seqs[j])}
		for k := i; k <= j; k++ {
			g.seqs = append(g.seqs, seqs[k]-seqs[i])
		}
		out = append(out, g)
		i = j
	}
	return out
}

// cutGrouped lays out a grouped arena of T rows: with train, the L+1
// residuals, the residual gradient and the per-token head gradients;
// always the final norm and the head's outputs. Its group arena is cut
// for the largest group.
func cutGrouped(old *activations, dev Device, d dims, T int, train bool, spans []span) *activations {
	c := groupedCut(d, T, train)
	nx, tb := c.Residuals, c.BackwardRows
	// Under mixed precision the training residuals live in the compute
	// dtype, as in cutActivations: the group arenas' xmid is bf16 there,
	// and a layer's residual add keeps its input and output in one dtype.
	split := Stores(dev, StoreCompute)
	views := gradViews(dev)
	size, rsize := activationLayout(d, c, split, views)
	a := old
	if a != nil && (!a.grouped || a.cap < size || a.rcap < rsize) {
		a.free(dev)
		a = nil
	}
	if a == nil {
		a = &activations{arena: dev.Alloc(size), cap: size, grouped: true}
		if split && rsize > 0 {
			a.resid, _ = AllocAs(dev, rsize, StoreCompute)
			a.rcap = rsize
		}
	}
	a.T, a.nsaved, a.live = T, 0, -1
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
	a.lnf, a.rstdf = take(T*d.C), take(T)
	a.logprob, a.entropy, a.lseV, a.values = take(T), take(T), take(T), take(T)
	a.dx, a.dxc = take(tb*d.C), nil
	if views && tb > 0 {
		a.dxc = takeR(tb * d.C)
	}
	a.dlogprob, a.dentropy, a.dvalues = take(tb), take(tb), take(tb)
	a.tmp, a.dln, a.dqkv, a.datt, a.dgu, a.dact, a.dqkvc = nil, nil, nil, nil, nil, nil, nil
	if off != size || roff != rsize {
		panic("model: grouped activation arena size and views disagree")
	}
	big := 0
	for _, g := range spans {
		big = max(big, g.t1-g.t0)
	}
	a.grp = cutActivations(a.grp, dev, d, groupCut(big, train))
	return a
}

// group returns the group arena re-cut for span g of the grouped arena a:
// its residuals (training) and residual gradient are a's rows.
func (a *activations) group(dev Device, d dims, g span, train bool) *activations {
	n := g.t1 - g.t0
	ga := cutActivations(a.grp, dev, d, groupCut(n, train))
	a.grp = ga
	if train {
		for l := 0; l <= d.L; l++ {
			ga.xs = append(ga.xs, a.xs[l].Slice(g.t0*d.C, n*d.C))
		}
		ga.dx = a.dx.Slice(g.t0*d.C, n*d.C)
		if a.dxc != nil {
			ga.dxc = a.dxc.Slice(g.t0*d.C, n*d.C)
		}
	}
	ga.pos, ga.targets = a.pos[g.t0:g.t1], a.targets[g.t0:g.t1]
	ga.seqs, ga.row0 = g.seqs, g.t0
	return ga
}
