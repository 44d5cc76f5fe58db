package model

// Optional device capabilities. A Device may implement these beyond the
// Device interface; callers check with a type assertion and keep their
// plain path when it does not, so the CPU device's results never change.

// MixedPrecision is a device that can compute from bf16 copies of float32
// weights (fp32 master weights, fp32 accumulation): UseBF16 registers one
// weight buffer, such as a Model's Params, and switches the device to
// mixed precision. The CUDA device implements it.
type MixedPrecision interface {
	UseBF16(weights Buffer)
}

// ComputeStorage is a device that can store values in the precision it
// computes in: AllocCompute returns n zeroed values stored as bf16 on a
// CUDA device in mixed precision (half the memory), and float32 otherwise.
// The model stores its KV cache (NewKVCache), its residual stream (the
// activation arena's x and xmid views) and each layer's tensors that feed
// a matmul or attention (ln1, qkv, att, ln2, gu, act, qkraw) there, so a
// mixed-precision run keeps them in bf16, as it computes; the device's
// ops read and write them in either dtype (AttentionCached's kc, vc, qkv
// and out; Add's out and a; RMSNorm's out and inp, RMSNormBackward's inp;
// Embedding's out and table; Gemm's a, b and c; AddBias's out; RoPE's x;
// Attention's and AttentionBackward's qkv and out; SwiGLU's out and gu,
// SwiGLUBackward's gu and dgu; ResidualNorm's sum, a, out, inp and dxc)
// and Copy converts. Statistics, the final norm, the head and every
// gradient stay float32 (activations.go), beside the compute views of
// GradientRounding. The CPU device does not implement it: its path is
// unchanged.
type ComputeStorage interface {
	AllocCompute(n int) Buffer
}

// ResidualNorm is a device that fuses a residual add with the RMSNorm
// beside it, the same results in one pass: AddRMSNorm is Add(sum, a, b)
// then RMSNorm(out, rstd, sum, w, rows, C, eps), and RMSNormBackwardAdd is
// RMSNormBackward into a scratch then Add(dx, resid, scratch) (resid nil:
// dx is set; resid may be dx), also writing dx into dxc when dxc is not nil
// (the gradient's compute view, GradientRounding). The layer uses them
// for xmid and ln2 in the forward and for both norms' input gradients in
// the backward. The CUDA device implements it.
type ResidualNorm interface {
	AddRMSNorm(sum, out, rstd, a, b, w Buffer, rows, C int, eps float32)
	RMSNormBackwardAdd(dx, dxc, dw, dout, inp, w, rstd, resid Buffer, rows, C int)
}

// GradientRounding is a device whose matmuls round every float32 operand
// to its compute precision while RoundsGradients reports true (CUDA in
// mixed precision: bf16). Then the model rounds each activation gradient
// once, where it is produced, into a view in compute storage
// (ComputeStorage, beside the activations), and the matmuls read that view
// instead of rounding the same values once each: SwiGLUBackward writes
// dgu there (two matmuls are its only readers), RMSNormBackwardAdd
// (ResidualNorm, required too) writes the residual gradient's view beside
// the float32 gradient it accumulates, and Copy rounds dqkv once after
// RoPE's backward. The same values are rounded to the same bf16; only the
// place of the rounding moves. The CUDA device implements it.
type GradientRounding interface {
	RoundsGradients() bool
}

// DeviceSampler is a device that draws tokens from logits it holds, so a
// decode step moves a token id and its log-probability per row instead of
// a row of V logits. SampleRows draws row r of logits[rows, V] from the
// distribution SampleToken draws from under s (temperature, top-k, top-p;
// greedy for temperature 0) with seeds[r] choosing its random numbers,
// and returns each token with its log-probability under softmax(logits/T).
// The CUDA device implements it; Model.StepSample uses it when present.
type DeviceSampler interface {
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

// CachedRoPEAttender is a device that can fold a KV-cache step's attention
// prologue into its cached attention: AttentionCachedRoPE computes what
// AddBias(qkv, bias) (skipped for a nil bias), RoPE of qkv's NH query and
// KVH key heads at each row's position pos0[j]+i, then AttentionCached
// compute, but may leave qkv unbiased and unrotated (a step reads it no
// more). Model.Step uses it for models without q/k norms; the CUDA device
// implements it (a decode step's bias, rotation, cache write and
// attention in one kernel).
type CachedRoPEAttender interface {
	AttentionCachedRoPE(out, qkv, bias, kc, vc Buffer, slots, pos0, lens []int32, maxLen, NH, KVH, HS int, theta float64)
}
