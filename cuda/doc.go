// Package cuda implements model.Device on NVIDIA GPUs.
//
// The central type is Device: one GPU, its primary CUDA context, one
// stream on which every operation is queued in call order, and a cuBLAS
// handle bound to that stream. Open returns the first GPU; Buffer is a
// span of its memory (address, length, element type) whose Slice views
// share the allocation.
//
// Nothing CUDA is needed to build or test the package: the driver
// (libcuda.so.1), cuBLAS (libcublas.so.13, then .12) and NVRTC
// (libnvrtc.so.13, then .12) are opened at run time with purego, so
// CGO_ENABLED=0 builds pass and one binary runs on CUDA 12 and 13 boxes.
// R1GO_LIBCUDA, R1GO_CUBLAS and R1GO_NVRTC name the libraries explicitly.
//
// Kernels are CUDA C++ files under kernels/, one per op, embedded in the
// binary and compiled by NVRTC for the card's architecture (sm_90a on
// Hopper) on first use. Compiled images are cached on disk under
// R1GO_CUDA_CACHE (default: the user cache folder, r1go/cuda), keyed by
// source, headers, options, NVRTC version and architecture;
// PrecompileKernels fills such a folder on a machine without a GPU, and a
// GPU machine without NVRTC runs from it. Kernels bring their own bf16 and
// reduction helpers (kernels/common.cuh), so NVRTC needs no toolkit headers.
// Each launcher (one Go file per op) keeps the CPU op's name and argument
// order; the CPU device of package model is the reference every op is
// tested against.
//
// Beyond model.Device: Sample and SampleRows (model.Sampler, which
// model.Model.StepSample uses) draw tokens on the GPU so a decode step
// moves token ids and their logprobs instead of logits: greedy,
// temperature sampling by the Gumbel-max trick, and top-k / top-p with the
// host sampler's kept set, found by a radix select over order-preserving
// (logit, id) keys instead of a sort; Capture and Graph.Launch record and replay
// a stretch of queued work as a CUDA graph, and GraphStep
// (model.StepGrapher, which model.Decoder uses) records a decode step once
// and replays it, rewriting only the host arrays it reads (token ids,
// positions, cache rows) before each replay; decode steps (one token per
// sequence) run a decode attention kernel in which a key-value head's
// query heads share each read of the KV cache: for a bf16 step on sm_80
// and later, attention_decode_tc.cu, whose group of query heads fills the
// rows of the tensor cores' products and whose keys split into ranges
// when the rows are too few to fill the GPU (R1GO_CUDA_DECODE_TC=0 keeps
// the CUDA-core kernel); AttentionCached with a rope theta folds the
// step's q/k/v bias and RoPE into it, one launch a layer.
//
// Precision: buffers passed through model.Device hold float32, except the
// bf16 storage below, and every accumulation is float32 or wider (double for the LM head's softmax sums
// and for SumSquares); matmuls use cublasGemmEx with float32 compute, or
// TF32 tensor cores when opened with Options.TF32 (R1GO_CUDA_TF32=1).
// Buffer carries its element type (F32, BF16); Convert rounds to nearest
// even; Gemm takes bf16 operands (tensor cores, float32 accumulation).
//
// Mixed precision (mixed.go): UseBF16 (model.MixedPrecision) gives a
// weight arena a bf16 compute copy and switches the Device to bf16
// matmul inputs with float32 accumulation; master weights, gradients and
// AdamW moments stay float32, and AdamW writes the new bf16 copy in the
// same pass, so rollouts sample from the bf16 copy of the trainer's own
// weights. Norms, RoPE, attention's softmax, SwiGLU and the loss head
// (logprob, entropy and their backward) compute in float32.
//
// bf16 storage, as PyTorch autocast and verl's FSDP bf16 keep it: under
// mixed precision AllocCompute (model.StoreCompute) hands out bf16, and
// the model stores its KV cache (model.NewKVCache), its residual stream
// (every layer's input x and mid-layer residual xmid: what a training
// forward saves for the backward under recomputation, and the hidden
// states of decode and scoring) and each layer's matmul and attention
// tensors (the norm outputs ln1 and ln2, qkv, the attention output, gate|up
// and the SwiGLU output, Qwen3's raw q|k|v: what a training forward saves
// for the backward without recomputation) there. The ops that touch them
// read bf16 (widened exactly) and write bf16 (rounded to nearest even
// once, from a float32 result): AttentionCached's cache, Add into the
// stream, RMSNorm (bf16 in, bf16 or float32 out) and RMSNormBackward,
// Embedding into the stream, Gemm (bf16 activations times the weights'
// bf16 copy into a bf16 qkv or gate|up, or a float32 branch output;
// float32 gradients times bf16 activations into float32 weight
// gradients), AddBias into qkv, RoPE in place, Attention and its backward,
// AttentionCached's q and output, SwiGLU and its backward. A frozen model (the
// reference policy) holds bf16 weights only (AllocBF16, frozen.go): no
// float32 arena, float32 sources rounded once at load; and AdamW keeps
// bf16 moments (AllocBF16: optim state_dtype bfloat16) with the CPU
// device's stochastic rounding. What stays float32: the per-row
// statistics (RMSNorm's rstd, attention's log-normalisers), the branch
// output before each residual add, the final norm (the LM head's input:
// the loss path is float32 end to end), the head's outputs, and every
// gradient of the backward (activation gradients and weight gradients:
// rounding a gradient to bf16 between two ops would add an error per op
// that the matmuls, which round their inputs once anyway, do not need).
// A gradient whose readers are matmuls is rounded once, by the op that
// writes it, instead of by each matmul (model.MixedPrecision): the LM
// head's backward writes each chunk's logit gradient in bf16,
// SwiGLUBackward writes dgu in bf16, RMSNormBackward writes a bf16 view
// of the residual gradient (dinpc) beside the float32 one it accumulates,
// and dqkv is rounded once after RoPE's backward: the same bf16 operands.
// Tolerances against the CPU device
// in float32, with u = 2^−8 (bf16's unit roundoff), tested on the
// emulator by mixed_test.go, kvbf16_test.go, activbf16_test.go, activlayer_test.go,
// frozen_test.go and adamwbf16_test.go:
//
//	op                      tolerance vs CPU float32                  why
//	Gemm (any operands)     |Δc_ij| ≤ (2u+u²+(K+2)·2^−24)·Σ_p|a_ip·b_pj|  each input rounded once
//	Embedding               exact: the row of the bf16 table           one rounding
//	AdamW masters, m, v     relErr ≤ 1e-6 (as float32 mode)            float32 update
//	AdamW bf16 copy         exact: bf16.Round(new master)               written in the same pass
//	AdamW bf16 m, v         equal, or one bf16 step apart; masters 1e-6 the CPU's step; seen: bit-equal
//	LMHead logprob          |Δ| ≤ 2·max_v δ_v                          δ_v: the Gemm bound of logit v
//	LMHead entropy          |Δ| ≤ 2·max_v δ_v·Σ_v p_v|z_v − z̄|          first order in δ, 2× slack
//	LMHeadBackward dh, dw   relErr ≤ 2^−5                              three bf16 roundings, 2× slack
//	RMSNorm, RoPE, attention, SwiGLU, Add: float32 ops, the float32 tolerances of device_test.go
//	KV cache (bf16) k, v    exact: bf16.Round of the CPU's              one rounding at the write
//	AttentionCached out     |Δo_d| ≤ (u+4δs)·max_j|v_jd| + 2^−17·max_j|v_jd|  δs = u·scale·max_j Σ_d|q_d·k_jd|; seen ≤ 0.1 of it
//	Add into bf16 stream    exact: bf16.Round(a + b), a the bf16 stream  sum in float32, one rounding
//	Embedding → bf16        exact: bf16.Round of the CPU's rows          one rounding
//	RMSNorm(+Backward), bf16 input or weight: the float32 tolerances on the widened values
//	bf16 layer tensors      RMSNorm, RoPE, SwiGLU, Attention, AttentionCached and Gemm writing bf16:
//	                        |Δ| ≤ u·|x| + the float32 tolerance (seen up to 0.99 of it: one rounding);
//	                        AddBias into bf16: exact bf16.Round; backward ops over bf16 inputs:
//	                        the float32 tolerances (activlayer_test.go)
//	frozen bf16 model       weights exact bf16.Round; logprob and logits relErr ≤ 2^−6 vs its registered twin
//	                        (norm weights and biases rounded too; seen 0 on the tiny Qwen)
//	5 training steps        |Δloss| ≤ 1e-2·loss                        seen on the emulator with every layer
//	                                                                   tensor bf16: ≤ 6.5e-4 (Qwen2, whole
//	                                                                   and grouped), ≤ 1.7e-3 (Qwen3)
//	LoRA, 5 steps (mixed)   |Δloss| ≤ 1e-2·loss, step-1 grads 2^−5     seen: ≤ 3.4e-4, grads 7.4e-3
//	gradients rounded once, exact: the bits of the unfused ops and      the same rounding at another place
//	fused residual norms    per-matmul rounding (gradbf16_test.go,     (an RMSNorm's dw: float32 summation
//	                        mixedstep_test.go)                          error on a GPU, atomics)
//	decode logits after it  relErr ≤ 2^−5                              seen: ≤ 0.014 (bf16 KV cache, graphs,
//	                                                                   device sampling)
//
// Memory (vmm.go): asked for (Options.VMM, which cmd/train sets under
// dp.zero=2 and dp.shard_masters), allocations of eight chunks or more
// (16 MiB on current GPUs) are VMM arenas: a reserved address range backed by 2 MiB physical
// chunks (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess), so
// that a span can give its memory back and take it again at the same
// addresses (model.Pager: ReleasePages, MapPages). ZeRO-2 gives back the
// gradient arena's buckets as they are reduce-scattered and maps each
// layer's gradients again before the backward writes them. Otherwise
// (not asked for, or the GPU or driver lacks it) every allocation is
// cuMemAlloc's and VMM says why.
//
// Testing without a GPU: the tests of host-side logic always run; NVRTC
// compiles every kernel in a test wherever the library is found; the GPU
// tests (every op against the CPU device, the PyTorch golden fixtures,
// training and decoding against the CPU) skip without a GPU, and
// testdata/emu builds a host emulation of the kernels and of libcuda and
// libcublas that runs them on a CPU (see testdata/emu/build.py).
// testdata/emu/ci.sh, a step of .ci/run, fetches NVRTC 12.5 from Debian,
// builds the emulator and runs the whole suite on it, where no GPU test
// may skip (R1GO_EMU_STRICT=1).
//
// Buffers a call may overwrite are its outputs, as model.Device documents:
// parameter gradients accumulate (+=), activation gradients and forward
// outputs are overwritten (=). Internal scratch (LM head logits, attention
// row statistics, uploaded token ids and positions) belongs to the Device
// and is reused call to call; work on the one stream runs in order, so
// reuse is safe without waiting.
//
// Errors: Open returns an error wrapping ErrNoDriver when libcuda cannot be
// loaded and ErrNoDevice when the driver finds no GPU, so commands can fall
// back to the CPU. A failed driver, cuBLAS or NVRTC call is an *Error
// naming the call and the library's result code; a kernel NVRTC rejects
// is a *CompileError with the compiler log. Device methods queue work
// without waiting, so a failure inside queued work is returned by the next
// Sync. Shape mismatches, foreign buffers, indices outside a table and
// running out of device memory panic, as for the CPU device.
package cuda
