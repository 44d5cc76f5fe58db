package model

// Buffer is a span of device memory. A CPU buffer is a Go slice; a GPU
// buffer is a device pointer with a length. Slice returns a view that shares
// memory with its parent, as image.SubImage does.
type Buffer interface {
	Len() int                // number of elements
	Slice(off, n int) Buffer // elements [off, off+n), sharing memory
}

// AdamWParams are the hyperparameters of one AdamW step over a flat buffer.
type AdamWParams struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	Step                               int     // 1-based step count, for bias correction
	GradScale                          float32 // multiplies every gradient first (clipping, accumulation)
}

// Device is the seam between the model's math and the hardware: a short list
// of fused operations in the style of llm.c, not a tensor library.
//
// Conventions, for every method:
//   - Shapes are row-major; T is the number of packed tokens (rows), C the
//     hidden size, V the vocabulary, I the MLP width, NH/KVH the query and
//     key-value heads, HS the head size.
//   - Argument order is outputs, saved statistics, inputs, weights, dims.
//   - Parameter gradients accumulate (+=); activation gradients overwrite (=)
//     unless a method says otherwise. A nil weight gradient (LMHeadBackward's
//     and RMSNormBackward's dw) is a frozen weight's: the method skips it
//     and computes only the input gradient (adapters on a frozen base).
//   - Host slices ([]int32) carry token ids, positions and sequence offsets;
//     a GPU device uploads them itself.
//   - Shape mismatches are programmer errors and panic; Sync reports errors
//     that an asynchronous device met while running queued work.
type Device interface {
	Name() string

	// Memory.
	Alloc(n int) Buffer // zero-filled
	Free(b Buffer)
	Upload(dst Buffer, src []float32)
	Download(dst []float32, src Buffer)
	Zero(b Buffer)
	// Copy copies src into dst, of the same length, converting between
	// the storages they hold (float32, bf16: rounded to nearest even or
	// widened; into a BF16Products.ProductMatrix view: rearranged from
	// rows into its layout).
	Copy(dst, src Buffer)
	Sync() error

	// Gemm computes c = alpha·op(a)·op(b) + beta·c for row-major a, b, c
	// with leading dimensions lda, ldb, ldc; op(x) is x or its transpose.
	// c is [m,n]; op(a) is [m,k]; op(b) is [k,n]. beta = 0 never reads c.
	Gemm(transA, transB bool, m, n, k int, alpha float32, a Buffer, lda int, b Buffer, ldb int, beta float32, c Buffer, ldc int)
	// AddBias adds bias[cols] to every row of out[rows, ldo] (first cols columns).
	AddBias(out Buffer, ldo int, bias Buffer, rows, cols int)
	// BiasBackward accumulates dbias[cols] += column sums of dout[rows, ldo].
	BiasBackward(dbias Buffer, dout Buffer, ldo int, rows, cols int)
	// Add sets out = a + b elementwise (out may alias a or b).
	Add(out, a, b Buffer)

	// Embedding copies row ids[t] of table[V, C] into out[t]: the token
	// embedding, and the gather of chosen rows (a decode step's rows of h
	// whose logits it wants, before one Gemm with the head).
	Embedding(out Buffer, ids []int32, table Buffer, C int)
	EmbeddingBackward(dtable Buffer, dout Buffer, ids []int32, C int)

	// RMSNorm: out = x·rsqrt(mean(x²)+eps)·w per row; rstd[rows] saved.
	// x is inp, or with resid not nil inp + resid, written into sum (the
	// residual add before a norm, fused: the layer's xmid and ln2; sum may
	// alias inp or resid, and is unused, nil, without resid). The fused
	// form has the results of Add(sum, inp, resid) then the plain norm of
	// sum.
	RMSNorm(out, sum, rstd, inp, resid, w Buffer, rows, C int, eps float32)
	// RMSNormBackward sets dinp to the input gradient, or with resid not
	// nil to resid + the input gradient (resid may be dinp: the layer's
	// residual gradient accumulates in place), with the results of the
	// backward into a scratch then Add; dw accumulates. dinpc, when not
	// nil, receives dinp too, in its storage (the residual gradient's
	// compute view, MixedPrecision).
	RMSNormBackward(dinp, dinpc, dw, dout, inp, w, rstd, resid Buffer, rows, C int)

	// RoPE rotates, in place, heads [0, nHeads) of each row of x (row stride
	// ld, starting at column off) by the angle pos[row]·theta^(-2i/HS), in
	// the rotate-half (NeoX) form. A negative position turns by the
	// opposite of its magnitude's angle, bit for bit, so the backward is
	// RoPE of the gradient at the negated positions: the rotation is
	// orthogonal, and its transpose turns the other way.
	RoPE(x Buffer, ld, off int, pos []int32, nHeads, HS int, theta float64)

	// Attention is causal grouped-query attention over packed sequences:
	// qkv[T, (NH+2·KVH)·HS] holds q|k|v per row; seqs[0..n] are sequence
	// start offsets with seqs[n] = T. out[T, NH·HS]; lse[NH, T] saves the
	// softmax log-normaliser for the backward.
	Attention(out, lse, qkv Buffer, seqs []int32, NH, KVH, HS int)
	AttentionBackward(dqkv, dout, out, lse, qkv Buffer, seqs []int32, NH, KVH, HS int)

	// AttentionCached serves prefill and decode: chunk j of the packed qkv
	// (lens[j] rows) continues KV-cache slot slots[j] at position pos0[j]. Its
	// k and v are written into the cache, then its queries attend causally to
	// cache positions [0, pos0[j]+lens[j]). kc and vc are [slots, maxLen, KVH·HS].
	// With theta > 0 the step's attention prologue comes first: AddBias of
	// bias[(NH+2·KVH)·HS] (nil: none), then RoPE with theta of the NH query
	// and KVH key heads, row i of chunk j at position pos0[j]+i; qkv may be
	// left as it was (a step reads it no more), as the CUDA device's fused
	// decode kernel does. theta = 0 (bias nil) takes qkv as it is: a model
	// with q/k norms, which sit between the bias and the rotation.
	AttentionCached(out, qkv, bias, kc, vc Buffer, slots, pos0, lens []int32, maxLen, NH, KVH, HS int, theta float64)

	// SwiGLU: out[T, I] = silu(gu[:, :I]) ⊙ gu[:, I:], gu[T, 2I].
	SwiGLU(out, gu Buffer, rows, I int)
	SwiGLUBackward(dgu, dout, gu Buffer, rows, I int)

	// LMHead computes, per row t of h[T, C] against w[V, C], the log-softmax
	// probability of targets[t] (0 where targets[t] < 0) and the entropy of
	// the distribution, in vocabulary chunks so that [T, V] logits never
	// exist at once; lse[T] is saved for the backward. logits is nil, or on
	// a device that holds StoreKeptLogits a [T, V] buffer of that kind that
	// keeps every logit for the backward (one product of the head fewer,
	// for T·V floats of memory; Model.keeps decides).
	LMHead(logprob, entropy, lse, logits, h, w Buffer, targets []int32, T, C, V int)
	// LMHeadBackward sets dh and accumulates dw from d/dlogprob and
	// d/dentropy. logits is nil (the logits are computed again) or the
	// buffer LMHead kept them in, which it reads instead and overwrites
	// with their gradients: the same values.
	LMHeadBackward(dh, dw, dlogprob, dentropy, logits, h, w, lse, entropy Buffer, targets []int32, T, C, V int)

	// SumSquares returns Σ x² in float64 (gradient-norm clipping).
	SumSquares(x Buffer) float64
	// AdamW updates p in place from g and the moments m, v (all the same length).
	AdamW(p, g, m, v Buffer, hp AdamWParams)
}

// Optional capabilities. A Device may implement these beyond the Device
// interface; the model checks with a type assertion and keeps its plain
// path when the device does not, so the CPU device's results never change
// because another device gained one. Every capability the model, the
// optimizer and the data-parallel code look for is listed here, with who
// implements it and which call changes with it:
//
//	MixedPrecision      CUDA       UseBF16: cmd/train's mixed precision; Mixed: gradViews (activations.go), rl's reference dtype
//	Storage             CUDA, CPU  AllocAs: StoreCompute (CUDA: the activation arenas' compute views, NewKVCache),
//	                               StoreBF16 (NewWith's bfloat16 weights, optim's bf16 moments), StoreBF16Products
//	                               and StoreKVArena (CPU: NewWith's rollout copy, its KV cache),
//	                               StoreKeptLogits (CPU: keeps, the LM head's kept logits),
//	                               StoreEngineLogits (CPU: StepSample's logits of a rollout copy)
//	Sampler             CUDA, CPU  StepSample and Decoder draw where the logits are (DrawsOnDevice: CUDA)
//	StepGrapher         CUDA       Decoder replays a decode step as one graph launch
//	ComputeCopier       CUDA       ReadableWeights; rl/dp's sharded master weights
//	Pager               CUDA, CPU  ReleaseGrads, MapGrads, GradsResident, ReadableWeights (ZeRO-2);
//	                               with HostMemory, DropPages (spill.go, optim's offloaded moments)
//	HostMemory          CPU        in-place loading and saving, SpillWeights, Discard*, DrawsOnDevice (false)
//	BF16Products        CPU        the rollout copy's (LoadOptions.BF16Products) product layout and SwiGLU

// MixedPrecision is a device that can compute from bf16 copies of float32
// weights (fp32 master weights, fp32 accumulation): UseBF16 registers one
// weight buffer, such as a Model's Params, and switches the device to
// mixed precision, which Mixed reports. While it is on, the device's
// matmuls round every float32 operand to bf16; then the model rounds each
// activation gradient once, where it is produced, into a view in compute
// storage (StoreCompute, beside the activations), and the matmuls read
// that view instead of rounding the same values once each: SwiGLUBackward
// writes dgu there (two matmuls are its only readers), RMSNormBackward
// writes the residual gradient's view (dinpc) beside the float32 gradient
// it accumulates, and Copy rounds dqkv once after
// RoPE's backward. The same values are rounded to the same bf16; only the
// place of the rounding moves. The CUDA device implements it.
type MixedPrecision interface {
	UseBF16(weights Buffer)
	Mixed() bool
}

// StorageKind is a kind of storage a device may hold beside plain float32
// values (Device.Alloc), through Storage.AllocAs.
type StorageKind uint8

const (
	// StoreBF16 is bfloat16 values, widened where they are read: a frozen
	// model's weights (LoadOptions.DType "bfloat16") and optim's bf16
	// moments. The CPU and CUDA devices hold it.
	StoreBF16 StorageKind = iota + 1
	// StoreCompute is the precision the device computes in: bf16 on a
	// CUDA device in mixed precision (half the memory), float32 before
	// (see Storage).
	StoreCompute
	// StoreBF16Products is bf16 weights whose products round their other
	// operand to bf16 and sum on the CPU's bf16 dot product where it has
	// one (a rollout copy, LoadOptions.BF16Products; BF16Products). The CPU
	// holds it.
	StoreBF16Products
	// StoreKVArena is one bf16 buffer for a rollout copy's whole KV cache
	// (every layer's keys and values; in huge pages on the CPU where it is
	// large enough and asked to). The CPU holds it.
	StoreKVArena
	// StoreKeptLogits is a training forward's logits [T, V], which LMHead
	// writes and LMHeadBackward reads instead of computing them again (see
	// LMHead). The CPU holds it, as plain float32 values (Alloc's: the
	// model cuts the buffer from its activation arena); a device that does
	// not is never given kept logits.
	StoreKeptLogits
	// StoreEngineLogits is float32 logits of a rollout copy's decode step
	// (LoadOptions.BF16Products), which a Sampler may draw from as an
	// inference engine does: the CPU's with a float32 softmax
	// (model/cpu/sample32.go) instead of SampleToken's float64 sums. Every
	// other op reads them as float32 values. The CPU holds it.
	StoreEngineLogits
)

// Storage is a device that holds kinds of storage beyond float32: AllocAs
// returns n zero-filled values of kind, false where the device does not
// hold that kind; with n < 0 it allocates nothing and says whether it
// does (Stores).
//
// StoreCompute: the model stores its KV cache (NewKVCache), its residual stream (the
// activation arena's x and xmid views) and each layer's tensors that feed
// a matmul or attention (ln1, qkv, att, ln2, gu, act, qkraw) there, so a
// mixed-precision run keeps them in bf16, as it computes; the device's
// ops read and write them in either dtype (AttentionCached's kc, vc, qkv
// and out; Add's out and a; RMSNorm's out, sum and inp, RMSNormBackward's
// inp and dinpc; Embedding's out and table; Gemm's a, b and c; AddBias's
// out; RoPE's x; Attention's and AttentionBackward's qkv and out; SwiGLU's
// out and gu, SwiGLUBackward's gu and dgu) and Copy converts. Statistics,
// the final norm, the head and every gradient stay float32
// (activations.go), beside the compute views of MixedPrecision. The CPU
// device does not hold it: its path is unchanged.
type Storage interface {
	AllocAs(n int, kind StorageKind) (Buffer, bool)
}

// AllocAs returns n zero-filled values of kind on dev, false where dev
// does not hold that kind.
func AllocAs(dev Device, n int, kind StorageKind) (Buffer, bool) {
	if s, ok := dev.(Storage); ok {
		return s.AllocAs(n, kind)
	}
	return nil, false
}

// Stores says whether dev holds kind.
func Stores(dev Device, kind StorageKind) bool {
	_, ok := AllocAs(dev, -1, kind)
	return ok
}

// Sampler is a device that draws tokens from logits it holds, where they
// are. SampleRows draws row r of logits[rows, V] from the distribution
// SampleToken draws from under s (temperature, top-k, top-p; greedy for
// temperature 0) with seeds[r] choosing its random numbers, and returns
// each token with its log-probability under softmax(logits/T). The CUDA
// device draws on the GPU, so a decode step moves a token id and its
// log-probability per row instead of a row of V logits (DrawsOnDevice);
// the CPU draws on its threads, timed as its sampling, with SampleToken
// and a PCG stream seeded by seeds[r] (a rollout copy's logits,
// StoreEngineLogits, with a float32 softmax). Model.StepSample and
// Decoder use it.
type Sampler interface {
	SampleRows(tokens []int32, logprobs []float32, logits Buffer, V int, s Sampling, seeds []uint64) error
}

// StepGrapher is a device that records the device work of a step once and
// replays it as one graph launch while only the contents of the host
// arrays passed to its ops change (the CUDA device: CUDA graphs). key names
// everything else the work depends on; work may have no effect other than
// the device ops it queues, as it may run more than once or not at all.
// Decoder uses it for decode steps.
type StepGrapher interface {
	GraphStep(key string, work func()) error
}

// ComputeCopier is a mixed-precision device (the CUDA device) whose bf16
// compute copy of registered weights can be written from float32 values
// that are not the weights' own, and read: ZeRO's sharded master weights
// give back the float32 masters outside a rank's shard and gather the
// compute copy from the ranks' updated masters (rl/dp/masters.go).
type ComputeCopier interface {
	// ComputeCopy is the compute copy of w (registered weights, or a
	// slice of them), readable with Download and written by Copy from
	// float32 values (rounded), which leaves w's float32 values as they
	// are; false when w is not registered.
	ComputeCopy(w Buffer) (Buffer, bool)
}

// Pager is a device whose large buffers can give their memory back span by
// span and take it again: the CUDA device's VMM arenas (cuda/vmm.go), and
// the CPU's pages (madvise and mincore on Linux).
type Pager interface {
	// ReleasePages zeroes b and gives back the memory of its whole chunks
	// (pages) once the device is done with them; reading b before
	// MapPages (or Zero) is a device fault where the device unmaps them
	// (CUDA); the CPU's pages read as zeros. A spilled buffer
	// (HostMemory.Spill) is the exception: its pages leave the resident
	// set, and its values stay in its file, read back on the next touch.
	ReleasePages(b Buffer)
	// MapPages backs b again before it is written, zeroed where it was
	// given back.
	MapPages(b Buffer)
	// Resident is how many bytes of memory back b now (known false where
	// the device cannot say) and whether every byte of b is backed
	// (readable).
	Resident(b Buffer) (bytes int64, known, backed bool)
}

// HostMemory is a device whose buffers are host memory (the CPU). Loading
// and saving read and write a float32 arena in place instead of through a
// copy, and memory by phase
// (spill.go) maps buffers to files and gives their pages back (Pager).
type HostMemory interface {
	// Host is the memory behind one of its buffers: f32 for a float32
	// buffer, bf16 (the bit patterns) for a bfloat16 one; both nil for
	// any other (another device's).
	Host(b Buffer) (f32 []float32, bf16 []uint16)
	// Spill returns a copy of b (float32 or bf16) of the same kind in a
	// shared mapping of an unlinked file in dir: reads and writes go to the
	// page cache, which the kernel may write back and evict under memory
	// pressure and read back on the next touch (Pager.ReleasePages takes
	// its pages out of the resident set at once). dir must be on a disk.
	Spill(b Buffer, dir string) (Buffer, error)
}

// BF16Products is a device whose bf16 weights can take bf16 products (the
// CPU, with AVX512_BF16 or AMX where it has them): a rollout copy
// (LoadOptions.BF16Products, its weights and KV cache in
// StoreBF16Products and StoreKVArena) computes as an inference engine
// does, and its products and the layer's SwiGLU take these instead of
// their plain paths.
type BF16Products interface {
	// ProductMatrix returns the view of b, an n × k matrix of weights in
	// StoreBF16Products that is the B of a product, in the layout the
	// device's products read fastest (on AMX, the tile layout: only A·Bᵀ
	// over the whole matrix and a row lookup read it); false keeps b in
	// rows. Such a view is written by Copy from the matrix's values in
	// rows, which rearranges them into its layout; the source may be b
	// itself, the same memory read in rows, once its values are written.
	ProductMatrix(b Buffer, n, k int) (Buffer, bool)
	// SwiGLU32 is SwiGLU in float32 arithmetic, as an inference engine
	// computes it.
	SwiGLU32(out, gu Buffer, rows, I int)
}

// The block geometry of an LM head that computes its logits block by
// block (the CUDA device's fused head): at most HeadMaxRows rows of h, and
// a vocabulary chunk of at most HeadLogitBudget float32 logits over them
// (128 MiB): big enough that each block's matmul is a large GEMM, small
// next to the memory [T, V] logits would take. model/plan sizes the
// device's logit scratch with the same function.
const (
	HeadLogitBudget = 32 << 20
	HeadMaxRows     = 2048
)

// HeadBlock is the block of rows and the vocabulary chunk of a blocked LM
// head over T tokens and a vocabulary of V, for a budget of logits and a
// cap on rows (HeadLogitBudget and HeadMaxRows; tests shrink them): the
// chunk is a multiple of 128, at least 128, at most V.
func HeadBlock(T, V, budget, maxRows int) (rows, chunk int) {
	rows = max(1, min(T, maxRows))
	chunk = min(V, max(128, budget/rows/128*128))
	return rows, chunk
}

// HostF32 is the memory behind b, a float32 buffer of dev, where dev's
// buffers are host memory (HostMemory); false elsewhere.
func HostF32(dev Device, b Buffer) ([]float32, bool) {
	if h, ok := dev.(HostMemory); ok {
		f, _ := h.Host(b)
		return f, f != nil
	}
	return nil, false
}

// HostBF16 is the bit patterns behind b, a bfloat16 buffer of dev, where
// dev's buffers are host memory (HostMemory); false elsewhere.
func HostBF16(dev Device, b Buffer) ([]uint16, bool) {
	if h, ok := dev.(HostMemory); ok {
		_, bf := h.Host(b)
		return bf, bf != nil
	}
	return nil, false
}
