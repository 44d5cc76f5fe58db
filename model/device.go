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
//     unless a method says otherwise.
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

	Embedding(out Buffer, ids []int32, table Buffer, C int)
	EmbeddingBackward(dtable Buffer, dout Buffer, ids []int32, C int)

	// RMSNorm: out = inp·rsqrt(mean(inp²)+eps)·w per row; rstd[rows] saved.
	RMSNorm(out, rstd, inp, w Buffer, rows, C int, eps float32)
	RMSNormBackward(dinp, dw, dout, inp, w, rstd Buffer, rows, C int)

	// RoPE rotates, in place, heads [0, nHeads) of each row of x (row stride
	// ld, starting at column off) by the angle pos[row]·theta^(-2i/HS), in
	// the rotate-half (NeoX) form. RoPEBackward applies the inverse rotation
	// to the gradient, in place.
	RoPE(x Buffer, ld, off int, pos []int32, nHeads, HS int, theta float64)
	RoPEBackward(dx Buffer, ld, off int, pos []int32, nHeads, HS int, theta float64)

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
	AttentionCached(out, qkv, kc, vc Buffer, slots, pos0, lens []int32, maxLen, NH, KVH, HS int)

	// SwiGLU: out[T, I] = silu(gu[:, :I]) ⊙ gu[:, I:], gu[T, 2I].
	SwiGLU(out, gu Buffer, rows, I int)
	SwiGLUBackward(dgu, dout, gu Buffer, rows, I int)

	// LMHead computes, per row t of h[T, C] against w[V, C], the log-softmax
	// probability of targets[t] (0 where targets[t] < 0) and the entropy of
	// the distribution, in vocabulary chunks so that [T, V] logits never
	// exist at once; lse[T] is saved for the backward.
	LMHead(logprob, entropy, lse, h, w Buffer, targets []int32, T, C, V int)
	// LMHeadBackward sets dh and accumulates dw from d/dlogprob and d/dentropy.
	LMHeadBackward(dh, dw, dlogprob, dentropy, h, w, lse, entropy Buffer, targets []int32, T, C, V int)
	// Logits writes full logits[len(rows), V] for the chosen rows of h.
	Logits(logits, h, w Buffer, rows []int32, C, V int)

	// SumSquares returns Σ x² in float64 (gradient-norm clipping).
	SumSquares(x Buffer) float64
	// AdamW updates p in place from g and the moments m, v (all the same length).
	AdamW(p, g, m, v Buffer, hp AdamWParams)
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
