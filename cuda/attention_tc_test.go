package cuda

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"testing"

	"github.com/r1go/r1go/model"
)

// The tensor-core attention against the CPU device in float32, fed the same
// bf16 q|k|v. The kernels round P and dS to bf16 for the products and dO
// to bf16 once, as flash attention does, so they differ from the float32
// reference by far more than the CUDA-core kernels: about 2e-3 relative
// (L2) in the output and 3e-3 in the gradients, the level an H200 run of
// the same design showed against a float32 PyTorch reference. The bounds
// below are 1e-2 relative L2 and 3e-2 of the largest value for any one
// element; the log-sum-exp keeps float32 sums and the ex2.approx
// exponential (2 ulp): 1e-5 of its largest value.

const (
	tcTolL2  = 1e-2
	tcTolMax = 3e-2
	tcTolLSE = 1e-5
)

// checkTC compares got with the CPU's want by relative L2 and max error.
func checkTC(t *testing.T, what string, got, want []float32, tolL2, tolMax float64) {
	t.Helper()
	var num, den, worst, scale float64
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) || math.IsInf(g, 0) {
			t.Fatalf("%s[%d] = %g (CPU %g)", what, i, g, w)
		}
		num += (g - w) * (g - w)
		den += w * w
		worst = math.Max(worst, math.Abs(g-w))
		scale = math.Max(scale, math.Abs(w))
	}
	l2, mx := math.Sqrt(num/math.Max(den, 1e-30)), worst/math.Max(scale, 1e-30)
	if !(l2 <= tolL2) || !(mx <= tolMax) {
		t.Errorf("%s: relative L2 %.3g (bound %.3g), max %.3g (bound %.3g)", what, l2, tolL2, mx, tolMax)
		return
	}
	t.Logf("%s: relative L2 %.3g, max %.3g", what, l2, mx)
}

var tcCases = []struct {
	seqs        []int32
	NH, KVH, HS int
	name        string
}{
	{[]int32{0, 1, 38, 102, 167}, 14, 2, 64, "Qwen2.5-0.5B heads (14/2, 64): lengths 1, 37, 64, 65"},
	{[]int32{0, 63, 80}, 12, 2, 128, "Qwen2.5-1.5B heads (12/2, 128): lengths 63, 17"},
	{[]int32{0, 129}, 2, 2, 64, "MHA (2/2, 64): one 129-token sequence"},
}

// TestGPUAttentionTC: every forward shape, the atomic and the
// deterministic backward, against the CPU device.
func TestGPUAttentionTC(t *testing.T) {
	e := newOpEnv(t)
	for _, c := range tcCases {
		a := newAttnLayout(c.NH, c.KVH, c.HS)
		T := int(c.seqs[len(c.seqs)-1])
		cq, gq, _ := e.bf16Pair(e.randn(T*a.W, 1))
		co := upload(e.cpu, make([]float32, T*c.NH*c.HS))
		cl := upload(e.cpu, make([]float32, c.NH*T))
		e.cpu.Attention(co, cl, cq, c.seqs, c.NH, c.KVH, c.HS)
		wantOut, wantLSE := download(e.cpu, co), download(e.cpu, cl)
		if !e.gpu.tensorCores(a, true, gq.ptr) {
			t.Fatalf("%s: the tensor-core path is not chosen", c.name)
		}
		names := slices.Sorted(maps.Keys(tcForwards[c.HS]))
		gout, gl := e.gpu.AllocType(T*c.NH*c.HS, BF16), e.gpu.Alloc(c.NH*T)
		scale := float32(1 / math.Sqrt(float64(c.HS)))
		for _, name := range names {
			e.gpu.Upload(gout, e.randn(T*c.NH*c.HS, 1)) // garbage: every element must be written
			func() {
				defer e.gpu.enter()()
				e.gpu.attentionTC(tcForwards[c.HS][name], gout.ptr, gl.(Buffer).ptr, gq.ptr, a, c.seqs, T, scale)
			}()
			if err := e.gpu.Sync(); err != nil {
				t.Fatal(err)
			}
			what := fmt.Sprintf("%s, forward %q", c.name, name)
			checkTC(t, what+": out", downloadBF16(e.gpu, gout), wantOut, tcTolL2, tcTolMax)
			checkTC(t, what+": lse", download(e.gpu, gl), wantLSE, tcTolLSE, tcTolLSE)
		}
		// The backward reads the output the forward stored: the CPU gets
		// the GPU's bf16 output, so both compute D = rowsum(dO ⊙ O) alike.
		e.gpu.Attention(gout, gl, gq, c.seqs, c.NH, c.KVH, c.HS)
		cob := upload(e.cpu, downloadBF16(e.gpu, gout))
		cdy, gdy := e.pair(e.randn(T*c.NH*c.HS, 1))
		cdq := upload(e.cpu, make([]float32, T*a.W))
		e.cpu.AttentionBackward(cdq, cdy, cob, gl2cpu(e, gl), cq, c.seqs, c.NH, c.KVH, c.HS)
		want := download(e.cpu, cdq)
		// Each atomic shape, then the deterministic backward.
		type run struct {
			shape string
			det   bool
		}
		var runs []run
		for _, shape := range AttentionBackwardShapes(c.HS) {
			runs = append(runs, run{shape, false})
		}
		runs = append(runs, run{"", true})
		var got [][]float32
		for _, r := range runs {
			// garbage: the backward must overwrite all of it; one float past an
			// 8-byte boundary, as a gradient arena's slice can be
			gdq := upload(e.gpu, e.randn(T*a.W+1, 1)).(Buffer).Slice(1, T*a.W)
			e.gpu.SetDeterministic(r.det)
			e.gpu.SetAttentionBackward(r.shape)
			e.gpu.AttentionBackward(gdq, gdy, gout, gl, gq, c.seqs, c.NH, c.KVH, c.HS)
			e.gpu.SetDeterministic(false)
			e.gpu.SetAttentionBackward("")
			if err := e.gpu.Sync(); err != nil {
				t.Fatal(err)
			}
			got = append(got, download(e.gpu, gdq))
			what := fmt.Sprintf("%s, backward %q (deterministic %v)", c.name, r.shape, r.det)
			for _, part := range []struct {
				name     string
				from, to int
			}{{"dq", 0, a.kOff}, {"dk", a.kOff, a.vOff}, {"dv", a.vOff, a.W}} {
				checkTC(t, what+": "+part.name, columns(got[len(got)-1], a.W, part.from, part.to), columns(want, a.W, part.from, part.to), tcTolL2, tcTolMax)
			}
		}
		// The paths add the same products in different orders.
		for i := 1; i < len(got); i++ {
			checkTC(t, fmt.Sprintf("%s: backward %v against %v", c.name, runs[i], runs[0]), got[i], got[0], 1e-5, 1e-5)
		}
	}
}

// gl2cpu copies the GPU's lse to the CPU so that both backwards read the same.
func gl2cpu(e *opEnv, gl model.Buffer) model.Buffer { return upload(e.cpu, download(e.gpu, gl)) }

// columns returns columns [from, to) of each w-wide row of x.
func columns(x []float32, w, from, to int) []float32 {
	var out []float32
	for r := 0; r+w <= len(x); r += w {
		out = append(out, x[r+from:r+to]...)
	}
	return out
}

// TestAttentionTCTiles: the tiles cover every row of every sequence once,
// heaviest first, with each row's key count as the CUDA-core tiles have it.
func TestAttentionTCTiles(t *testing.T) {
	seqs := []int32{0, 1, 70, 70, 200, 329}
	for _, rows := range []int{64, 128} {
		tl := tcQueryTiles(seqs, rows)
		seen := make([]int, 329)
		prev := int32(math.MaxInt32)
		for i := 0; i < len(tl); i += 4 {
			x, y, z, w := tl[i], tl[i+1], tl[i+2], tl[i+3]
			if y < 1 || int(y) > rows || w+y-1 > prev {
				t.Fatalf("rows %d: tile %v out of order or size", rows, tl[i:i+4])
			}
			prev = w + y - 1
			for r := x; r < x+y; r++ {
				seen[r]++
				s := sort.Search(len(seqs), func(j int) bool { return seqs[j] > r }) - 1
				if z != seqs[s] || w+(r-x) != r-seqs[s]+1 {
					t.Fatalf("rows %d: row %d in tile %v: sequence start %d", rows, r, tl[i:i+4], seqs[s])
				}
			}
		}
		for r, n := range seen {
			if n != 1 {
				t.Fatalf("rows %d: row %d covered %d times", rows, r, n)
			}
		}
	}
	for _, keys := range []int{64, 128} {
		kt := tcKeyTiles(seqs, keys)
		seen := make([]int, 329)
		prev := int32(math.MaxInt32)
		for i := 0; i < len(kt); i += 4 {
			x, y, end, start := kt[i], kt[i+1], kt[i+2], kt[i+3]
			s := sort.Search(len(seqs), func(j int) bool { return seqs[j] > x }) - 1
			if end-x > prev || y < 1 || int(y) > keys || x+y > end || start != seqs[s] || end != seqs[s+1] {
				t.Fatalf("keys %d: key tile %v out of order or shape", keys, kt[i:i+4])
			}
			prev = end - x
			for r := x; r < x+y; r++ {
				seen[r]++
			}
		}
		for r, n := range seen {
			if n != 1 {
				t.Fatalf("keys %d: key row %d covered %d times", keys, r, n)
			}
		}
	}
}
