package cuda

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/r1go/r1go/internal/bf16"
	"github.com/r1go/r1go/model"
)

// Mixed precision's gradients rounded to bf16 once, by the op that
// produces them, and the residual adds fused with the RMSNorms beside
// them. Each new path is checked twice: bit for bit against the unfused
// ops it replaces, on the same device (the same float32 values rounded to
// the same bf16, at another place), and against the CPU device in float32
// with the tolerances of device_test.go and activlayer_test.go. An
// RMSNorm's dw, summed per block and then in block order, is the same bits
// too, on a GPU as on the emulator.

// sameBits requires got to equal want bit for bit. gpuTol > 0 marks
// values that a GPU sums with atomics in an order of its own (the
// tensor-core attention's default backward): on a GPU (not the emulator)
// they need only be within gpuTol (relErr).
func sameBits(t *testing.T, d *Device, what string, got, want []float32, gpuTol float64) {
	t.Helper()
	if gpuTol > 0 && !strings.Contains(d.Name(), "emulator") {
		if e := relErr(got, want); !(e <= gpuTol) {
			t.Fatalf("%s: relative error %.3g against the unfused ops, past %.3g", what, e, gpuTol)
		}
		return
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %g (%#08x), the unfused ops give %g (%#08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// rounded returns x rounded to bf16, as float32.
func rounded(x []float32) []float32 {
	r := make([]float32, len(x))
	for i, v := range x {
		r[i] = bf16.Round(v)
	}
	return r
}

// TestGPULMHeadGradBF16: the fused LM head under mixed precision with
// several row blocks and vocabulary chunks (headGeometry shrunk). Its
// forward rounds h once per block, its backward writes each chunk's logit
// gradient once as bf16 (lmhead_grad_bf16) for both matmuls. The
// reference is the launcher's old placement, built here from the same
// kernels and Gemm, which rounds each float32 operand on its way into
// each matmul: logprob, entropy, lse, dh and dw must be the same bits.
// Against the CPU, TestGPUMixedLMHead's bounds hold (2^−5 for dh, dw).
func TestGPULMHeadGradBF16(t *testing.T) {
	e := newMixedEnv(t)
	g := e.gpu
	defer func(b, r int) { headLogitBudget, headMaxRows = b, r }(headLogitBudget, headMaxRows)
	headLogitBudget, headMaxRows = 16*128, 16
	T, C, V := 37, 64, 300 // blocks of 16, 16, 5 rows; chunks of 128, 128, 44
	rows, chunk := headGeometry(T, V)
	if rows != 16 || chunk != 128 {
		t.Fatalf("geometry %d rows × %d, want 16 × 128", rows, chunk)
	}
	targets := make([]int32, T)
	for i := range targets {
		targets[i] = int32(e.rng.IntN(V))
	}
	targets[5], targets[T-1] = -1, -1 // sequence ends: no target
	h, w := e.randn(T*C, 1), e.randn(V*C, 0.3)
	ch, gh := e.pair(h)
	cw, gw := e.pair(w)
	g.UseBF16(gw)
	zeros := func(n int) (model.Buffer, model.Buffer) { return e.pair(make([]float32, n)) }
	clp, glp := zeros(T)
	cent, gent := zeros(T)
	clse, glse := zeros(T)
	e.cpu.LMHead(clp, cent, clse, nil, ch, cw, targets, T, C, V)
	g.LMHead(glp, gent, glse, nil, gh, gw, targets, T, C, V)
	dlp, dent := e.randn(T, 1), e.randn(T, 1)
	cdlp, gdlp := e.pair(dlp)
	cdent, gdent := e.pair(dent)
	dw0 := e.randn(V*C, 0.1) // dw accumulates
	cdh, gdh := zeros(T * C)
	cdw, gdw := e.pair(dw0)
	e.cpu.LMHeadBackward(cdh, cdw, cdlp, cdent, nil, ch, cw, clse, cent, targets, T, C, V)
	g.LMHeadBackward(gdh, gdw, gdlp, gdent, nil, gh, gw, glse, gent, targets, T, C, V)

	// The old placement: Gemm rounds h (and the gradient) per matmul.
	_, rlp := zeros(T)
	_, rent := zeros(T)
	_, rlse := zeros(T)
	_, rdh := zeros(T * C)
	rdw := upload(g, dw0)
	z := g.Alloc(rows * chunk)
	st := g.Alloc(8 * T)
	func() {
		defer g.enter()()
		pt, zp, sp := g.ints("ref-targets", targets), ptr(z), ptr(st)
		mx, se, sz, zy := sp, sp+uintptr(8*T), sp+uintptr(16*T), sp+uintptr(24*T)
		for t0 := 0; t0 < T; t0 += rows {
			n := min(rows, T-t0)
			for v0 := 0; v0 < V; v0 += chunk {
				m := min(chunk, V-v0)
				g.gemm(false, true, n, m, C, 1, ptr(gh)+uintptr(4*t0*C), C, ptr(gw)+uintptr(4*v0*C), C, 0, zp, m)
				o := uintptr(8 * t0)
				g.launch(kLMHeadStats, grid1(n), grid1(256), 0, argPtr(zp), argInt(m), argInt(v0), argPtr(pt+uintptr(4*t0)),
					argPtr(mx+o), argPtr(se+o), argPtr(sz+o), argPtr(zy+o), argInt(b2i(v0 == 0)))
			}
		}
		g.launch(kLMHeadFinish, grid1(ceilDiv(T, 256)), grid1(256), 0, argPtr(ptr(rlp)), argPtr(ptr(rent)), argPtr(ptr(rlse)),
			argPtr(mx), argPtr(se), argPtr(sz), argPtr(zy), argPtr(pt), argInt(T))
		for t0 := 0; t0 < T; t0 += rows {
			n := min(rows, T-t0)
			o := uintptr(4 * t0)
			hr := ptr(gh) + uintptr(4*t0*C)
			for v0 := 0; v0 < V; v0 += chunk {
				m := min(chunk, V-v0)
				wc := ptr(gw) + uintptr(4*v0*C)
				g.gemm(false, true, n, m, C, 1, hr, C, wc, C, 0, zp, m)
				g.launch(kLMHeadGrad, g.elementwiseGrid(n*m), grid1(256), 0, argPtr(zp), argInt(n), argInt(m), argInt(v0), argPtr(pt+o),
					argPtr(ptr(glse)+o), argPtr(ptr(gent)+o), argPtr(ptr(gdlp)+o), argPtr(ptr(gdent)+o))
				g.gemm(false, false, n, C, m, 1, zp, m, wc, C, float32(b2i(v0 > 0)), ptr(rdh)+uintptr(4*t0*C), C)
				g.gemm(true, false, m, C, n, 1, zp, m, hr, C, 1, ptr(rdw)+uintptr(4*v0*C), C)
			}
		}
	}()
	for _, c := range []struct {
		what     string
		got, ref model.Buffer
	}{{"logprob", glp, rlp}, {"entropy", gent, rent}, {"lse", glse, rlse}, {"dh", gdh, rdh}, {"dw", gdw, rdw}} {
		sameBits(t, g, "mixed LMHead "+c.what, download(g, c.got), download(g, c.ref), 0)
	}
	e.check("mixed LMHeadBackward dh against the CPU", cdh, gdh, 1.0/32)
	e.check("mixed LMHeadBackward dw against the CPU", cdw, gdw, 1.0/32)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestGPUSwiGLUBackwardBF16: SwiGLUBackward into a bf16 dgu (mixed
// precision's gradient view) holds exactly the float32 kernel's dgu
// rounded to bf16, for a float32 and a bf16 gu; the float32 dgu keeps its
// CPU tolerance (expf of the two libraries: 2e-6).
func TestGPUSwiGLUBackwardBF16(t *testing.T) {
	e := newOpEnv(t)
	rows, I := 203, 300
	gu := e.randn(rows*2*I, 2)
	cgu, ggu := e.pair(gu)
	cgur, ggur, _ := e.bf16Pair(gu)
	cdy, gdy := e.pair(e.randn(rows*I, 1))
	for _, v := range []struct {
		name     string
		cgu, ggu model.Buffer
	}{{"f32 gu", cgu, ggu}, {"bf16 gu", cgur, ggur}} {
		cd, gd := e.pair(make([]float32, rows*2*I))
		gdb := e.gpu.AllocType(rows*2*I, BF16)
		e.cpu.SwiGLUBackward(cd, cdy, v.cgu, rows, I)
		e.gpu.SwiGLUBackward(gd, gdy, v.ggu, rows, I)
		e.gpu.SwiGLUBackward(gdb, gdy, v.ggu, rows, I)
		e.check("SwiGLUBackward, "+v.name+", f32 dgu", cd, gd, 2e-6)
		sameBits(t, e.gpu, "SwiGLUBackward, "+v.name+", bf16 dgu", downloadBF16(e.gpu, gdb), rounded(download(e.gpu, gd)), 0)
	}
}

// TestGPUAddRMSNorm: the residual add fused with the RMSNorm after it
// (RMSNorm with resid) gives the bits of Add then the plain RMSNorm (sum,
// out, rstd) on a float32 and a
// bf16 residual stream, with a float32 and a bf16 weight; the sum may
// overwrite a. Against the CPU: a bf16 sum is exactly the CPU's float32
// sum rounded, and the norm keeps RMSNorm's tolerances on the stored sum.
func TestGPUAddRMSNorm(t *testing.T) {
	e := newOpEnv(t)
	rows := 203
	for _, C := range []int{896, 37} {
		tol := 4*math.Sqrt(float64(C))*math.Ldexp(1, -24) + 1e-6
		for _, v := range []struct {
			stream, weight bool // bf16
			alias          bool // sum overwrites a
		}{{false, false, false}, {false, true, true}, {true, false, false}, {true, true, true}} {
			name := "AddRMSNorm C " + strconv.Itoa(C) + map[bool]string{false: ", f32 stream", true: ", bf16 stream"}[v.stream] +
				map[bool]string{false: ", f32 w", true: ", bf16 w"}[v.weight]
			a, b, w := e.randn(rows*C, 3), e.randn(rows*C, 1), e.randn(C, 1)
			buf := func(x []float32, bf bool) (model.Buffer, model.Buffer) {
				if bf {
					c, g, _ := e.bf16Pair(x)
					return c, g
				}
				return e.pair(x)
			}
			ca, ga := buf(a, v.stream)
			_, ra := buf(a, v.stream)
			cb, gb := e.pair(b)
			cw, gw := buf(w, v.weight)
			_, gsum := buf(make([]float32, rows*C), v.stream)
			_, rsum := buf(make([]float32, rows*C), v.stream)
			co, gout := buf(make([]float32, rows*C), v.stream)
			_, rout := buf(make([]float32, rows*C), v.stream)
			cr, gr := e.pair(make([]float32, rows))
			rr := upload(e.gpu, make([]float32, rows))
			if v.alias {
				gsum = ga
			}
			e.gpu.RMSNorm(gout, gsum, gr, ga, gb, gw, rows, C, 1e-6)
			e.gpu.Add(rsum, ra, gb)
			e.gpu.RMSNorm(rout, nil, rr, rsum, nil, gw, rows, C, 1e-6)
			get := func(b model.Buffer) []float32 {
				if x := b.(Buffer); x.dtype == BF16 {
					return downloadBF16(e.gpu, x)
				}
				return download(e.gpu, b)
			}
			sameBits(t, e.gpu, name+": sum", get(gsum), get(rsum), 0)
			sameBits(t, e.gpu, name+": out", get(gout), get(rout), 0)
			sameBits(t, e.gpu, name+": rstd", get(gr), get(rr), 0)
			csum := upload(e.cpu, make([]float32, rows*C))
			e.cpu.Add(csum, ca, cb)
			if v.stream {
				e.checkRounded(name+": sum", csum, gsum.(Buffer))
				e.cpu.Upload(csum, rounded(download(e.cpu, csum))) // the norm reads the stored sum
			} else {
				e.check(name+": sum", csum, gsum, 0)
			}
			e.cpu.RMSNorm(co, nil, cr, csum, nil, cw, rows, C, 1e-6)
			e.check(name+": rstd", cr, gr, tol)
			if v.stream {
				e.checkBF16Out(name+": out", co, gout.(Buffer), tol)
			} else {
				e.check(name+": out", co, gout, tol)
			}
		}
	}
}

// TestGPURMSNormBackwardAdd: the RMSNorm backward fused with the residual
// add after it (RMSNormBackward with resid or dinpc) gives the bits of the
// plain RMSNormBackward into a scratch then Add
// (dx = resid + dinp, resid aliasing dx as in the layer, or dx = dinp
// without resid), dxc holds exactly dx rounded to bf16 (or dx itself when
// float32), dw accumulates the same sums; over a float32 and a bf16 input.
// Against the CPU: device_test.go's RMSNormBackward tolerances.
func TestGPURMSNormBackwardAdd(t *testing.T) {
	e := newOpEnv(t)
	rows := 203
	for _, C := range []int{896, 37} {
		tol := 4*math.Sqrt(float64(C))*math.Ldexp(1, -24) + 1e-6
		for _, v := range []struct {
			xbf   bool   // bf16 input (the residual stream)
			resid bool   // add into dx (else set it)
			dxc   string // "", "bf16", "f32"
		}{{false, true, ""}, {true, true, "bf16"}, {true, false, "bf16"}, {false, true, "f32"}} {
			name := "RMSNormBackwardAdd C " + strconv.Itoa(C) + map[bool]string{false: ", f32 x", true: ", bf16 x"}[v.xbf] +
				map[bool]string{false: ", set", true: ", add"}[v.resid] + map[string]string{"": "", "bf16": ", bf16 dxc", "f32": ", f32 dxc"}[v.dxc]
			x, w := e.randn(rows*C, 3), e.randn(C, 1)
			cx, gx := e.pair(x)
			if v.xbf {
				var r []float32
				cx, gx, r = e.bf16Pair(x)
				x = r
			}
			cw, gw := e.pair(w)
			cr, gr := e.pair(make([]float32, rows))
			e.cpu.RMSNorm(upload(e.cpu, make([]float32, rows*C)), nil, cr, cx, nil, cw, rows, C, 1e-6)
			e.gpu.Upload(gr, download(e.cpu, cr)) // one rstd for every path
			dy, dx0, dw0 := e.randn(rows*C, 1), e.randn(rows*C, 1), e.randn(C, 1)
			cdy, gdy := e.pair(dy)
			cdx, gdx := e.pair(dx0)
			cdw, gdw := e.pair(dw0)
			rdx, rdw, tmp := upload(e.gpu, dx0), upload(e.gpu, dw0), e.gpu.Alloc(rows*C)
			var gdxc model.Buffer
			switch v.dxc {
			case "bf16":
				gdxc = e.gpu.AllocType(rows*C, BF16)
			case "f32":
				gdxc = e.gpu.AllocType(rows*C, F32)
			}
			var resid model.Buffer
			if v.resid {
				resid = gdx
			}
			e.gpu.RMSNormBackward(gdx, gdxc, gdw, gdy, gx, gw, gr, resid, rows, C)
			if v.resid {
				e.gpu.RMSNormBackward(tmp, nil, rdw, gdy, gx, gw, gr, nil, rows, C)
				e.gpu.Add(rdx, rdx, tmp)
			} else {
				e.gpu.RMSNormBackward(rdx, nil, rdw, gdy, gx, gw, gr, nil, rows, C)
			}
			got := download(e.gpu, gdx)
			sameBits(t, e.gpu, name+": dx", got, download(e.gpu, rdx), 0)
			sameBits(t, e.gpu, name+": dw", download(e.gpu, gdw), download(e.gpu, rdw), 0)
			switch v.dxc {
			case "bf16":
				sameBits(t, e.gpu, name+": dxc", downloadBF16(e.gpu, gdxc.(Buffer)), rounded(got), 0)
			case "f32":
				sameBits(t, e.gpu, name+": dxc", download(e.gpu, gdxc), got, 0)
			}
			if v.resid {
				ctmp := upload(e.cpu, make([]float32, rows*C))
				e.cpu.RMSNormBackward(ctmp, nil, cdw, cdy, cx, cw, cr, nil, rows, C)
				e.cpu.Add(cdx, cdx, ctmp)
			} else {
				e.cpu.RMSNormBackward(cdx, nil, cdw, cdy, cx, cw, cr, nil, rows, C)
			}
			e.check(name+": dx against the CPU", cdx, gdx, 10*tol)
			e.check(name+": dw against the CPU", cdw, gdw, 10*tol+4*math.Sqrt(float64(rows))*math.Ldexp(1, -24))
		}
	}
}
