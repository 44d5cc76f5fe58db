package cuda

import (
	"fmt"

	"github.com/r1go/r1go/model"
)

// Mixed precision. UseBF16 registers a buffer of float32 weights (a
// model's parameter arena) and gives it a bf16 compute copy on the device.
// From then on the Device computes in mixed precision:
//
//   - every matmul (Gemm, and those inside LMHead, LMHeadBackward and
//     Logits) reads bf16 inputs and accumulates in float32: a weight
//     operand is read from its bf16 copy, a bf16 activation or gradient
//     is read as it is, any other operand is rounded to bf16 on its way
//     in. The operands that several matmuls read are rounded once
//     instead: the final norm's rows by the LM head for all its chunks,
//     the head's logit gradient as lmhead_grad_bf16 computes it, and the
//     layers' activation gradients by the ops that produce them
//     (Mixed, model.MixedPrecision). Outputs are float32, or
//     bf16 where the model stores them so (qkv, gate|up), and parameter
//     gradients accumulate in float32;
//   - Embedding rows come out rounded to bf16, as read from the bf16 table;
//   - AdamW updates the float32 master weights and moments and writes the
//     new bf16 copy in the same pass (adamw_update_bf16), so the rollout
//     that follows samples from the bf16 copy of the trainer's own weights:
//     one model, no weight sync;
//   - Upload and Copy into registered weights refresh their bf16 copy.
//
// RMSNorm, RoPE, attention (its softmax), SwiGLU, the residual adds (alone
// or fused with the norm beside them: RMSNorm's and RMSNormBackward's
// resid) and the loss head (logprob, entropy, their backward) compute in float32,
// with the sums in float32 or double as before. Storage is bf16 where the
// model asks for compute storage (AllocCompute: the KV cache, the residual
// stream and each layer's norm, projection, attention and MLP outputs) and
// for a frozen model's weights (AllocBF16, frozen.go: the reference policy
// holds bf16 weights only, no float32 arena); the ops read those widened
// and write them rounded once. Other activations (the final norm, the
// head's outputs, statistics) and every gradient are float32, beside the
// bf16 views of the gradients that only matmuls read.
//
// Tolerances against the CPU device in float32 are in the package doc.

// weightCopy is a registered float32 weight buffer and its bf16 copy.
type weightCopy struct {
	base uintptr // device address of the float32 weights
	n    int     // elements
	bf   Buffer  // bf16 copy, n elements
}

var kAdamWBF16 = kernel("adamw.cu", "adamw_update_bf16", 256)

// UseBF16 gives the float32 weights w a bf16 compute copy and switches the
// Device to mixed precision (see above). Registering the same buffer again
// refreshes its copy; bf16 weights (AllocBF16) need no copy. It satisfies
// model.MixedPrecision.
func (d *Device) UseBF16(w model.Buffer) {
	if x, ok := w.(Buffer); ok && x.dtype == BF16 {
		d.mixed = true // a frozen bf16 model (frozen.go): its weights are the compute copy
		return
	}
	pw := f32(w, -1, "UseBF16 weights")
	defer d.enter()()
	d.mixed = true
	for _, c := range d.weights {
		if c.base == pw && c.n == w.Len() {
			d.refresh(pw, c.n)
			return
		}
	}
	c := weightCopy{base: pw, n: w.Len(), bf: d.alloc(w.Len(), BF16)}
	d.launch(kToBF16, d.elementwiseGrid(c.n), grid1(256), 0, argPtr(c.bf.ptr), argPtr(pw), argInt64(c.n))
	d.weights = append(d.weights, c)
}

// AllocAs returns n zeroed values of kind (model.Storage): bf16
// (AllocBF16, frozen.go) or compute storage (AllocCompute); the CPU's
// bf16-product kinds are not the GPU's. n < 0 allocates nothing.
func (d *Device) AllocAs(n int, kind model.StorageKind) (model.Buffer, bool) {
	var alloc func(int) model.Buffer
	switch kind {
	case model.StoreBF16:
		alloc = d.AllocBF16
	case model.StoreCompute:
		alloc = d.AllocCompute
	default:
		return nil, false
	}
	if n < 0 {
		return nil, true
	}
	return alloc(n), true
}

// AllocCompute returns n zeroed values in the Device's compute storage:
// bf16 once UseBF16 has switched it to mixed precision, float32 before
// (model.StoreCompute); NewKVCache stores its keys and values in it,
// which AttentionCached reads and writes in either type.
func (d *Device) AllocCompute(n int) model.Buffer {
	if d.Mixed() {
		return d.AllocType(n, BF16)
	}
	return d.Alloc(n)
}

// Mixed reports whether UseBF16 has switched the Device to mixed
// precision: then every matmul rounds its float32 operands to bf16, and
// the model rounds each activation gradient once, as it is produced, into
// bf16 compute storage that the matmuls read as it is
// (model.MixedPrecision).
func (d *Device) Mixed() bool { return d.mixed }

// WeightsBF16 returns the bf16 copy of registered weights w (or of the
// registered buffer w is a view into), and false when w is not registered.
func (d *Device) WeightsBF16(w model.Buffer) (Buffer, bool) {
	x := w.(Buffer)
	for _, c := range d.weights {
		if x.ptr >= c.base && x.ptr+uintptr(4*x.n) <= c.base+uintptr(4*c.n) {
			return Buffer{ptr: c.bf.ptr + (x.ptr-c.base)/2, n: x.n, dtype: BF16}, true
		}
	}
	return Buffer{}, false
}

// copyOf finds the registered weights holding [ptr, ptr+4·n) and returns
// the bf16 address of ptr.
func (d *Device) copyOf(ptr uintptr, n int) (uintptr, bool) {
	for _, c := range d.weights {
		if ptr >= c.base && ptr+uintptr(4*n) <= c.base+uintptr(4*c.n) {
			return c.bf.ptr + (ptr-c.base)/2, true
		}
	}
	return 0, false
}

// refresh re-converts the bf16 copy of whatever registered weights overlap
// [ptr, ptr+4·n): an Upload or Copy wrote float32 weights directly.
func (d *Device) refresh(ptr uintptr, n int) {
	for _, c := range d.weights {
		lo, hi := max(ptr, c.base), min(ptr+uintptr(4*n), c.base+uintptr(4*c.n))
		if lo >= hi {
			continue
		}
		k := int(hi-lo) / 4
		d.launch(kToBF16, d.elementwiseGrid(k), grid1(256), 0, argPtr(c.bf.ptr+(lo-c.base)/2), argPtr(lo), argInt64(k))
	}
}

// span is the number of elements a row-major rows×cols operand with
// leading dimension ld covers.
func span(rows, cols, ld int) int {
	if rows == 0 || cols == 0 {
		return 0
	}
	return (rows-1)*ld + cols
}

// bf16Operand returns a bf16 address holding the n float32 values at ptr:
// their registered copy, or a rounded copy in the scratch buffer slot.
func (d *Device) bf16Operand(ptr uintptr, n int, slot string) uintptr {
	if q, ok := d.copyOf(ptr, n); ok {
		return q
	}
	s := d.scratchBuf(slot, n, BF16)
	d.launch(kToBF16, d.elementwiseGrid(n), grid1(256), 0, argPtr(s.ptr), argPtr(ptr), argInt64(n))
	return s.ptr
}

// gemmMixed is d.gemm in mixed precision: bf16 inputs, float32
// accumulation and output.
func (d *Device) gemmMixed(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ldc int) {
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	qa := d.bf16Operand(a, span(ar, ac, lda), "mixed-a")
	qb := d.bf16Operand(b, span(br, bc, ldb), "mixed-b")
	d.gemmBF16(transA, transB, m, n, k, alpha, qa, lda, qb, ldb, beta, c, F32, ldc)
}

// gemmBF16 is one product of bf16 operands at a and b (row-major, as
// d.gemm) on tensor cores, accumulated in float32 into c of type ct (a
// bf16 c is rounded once from the float32 sum).
func (d *Device) gemmBF16(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ct DType, ldc int) {
	if d.rb.on {
		return
	}
	g := rowMajorGemm(transA, transB, m, n, k, a, lda, b, ldb)
	d.fail(d.blas.gemmTyped(d.handle, g, cudaR16BF, alpha, beta, c, cudaType(ct), ldc, cublasCompute32F))
}

// adamwMixed runs the AdamW pass that also writes the bf16 copy, when p is
// registered weights; it reports false otherwise.
func (d *Device) adamwMixed(pp, pg, pm, pv uintptr, n int, hp model.AdamWParams, c1, c2 float64) bool {
	pb, ok := d.copyOf(pp, n)
	if !ok {
		return false
	}
	d.launch(kAdamWBF16, d.elementwiseGrid(n), grid1(256), 0, argPtr(pp), argPtr(pb), argPtr(pg), argPtr(pm), argPtr(pv), argInt64(n),
		argFloat(hp.LR), argFloat(hp.Beta1), argFloat(hp.Beta2), argFloat(hp.Eps), argFloat(hp.WeightDecay), argFloat(float32(c1)), argFloat(float32(c2)), argFloat(hp.GradScale))
	return true
}

func (c weightCopy) String() string { return fmt.Sprintf("%d weights at %#x", c.n, c.base) }

var (
	_ model.MixedPrecision = (*Device)(nil)
	_ model.Storage        = (*Device)(nil)
)
