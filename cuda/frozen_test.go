package cuda

import (
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/r1go/r1go/internal/bf16"
	"github.com/r1go/r1go/model"
)

// allocSizes reads the emulator's allocation log from byte offset from and
// returns the sizes of the allocations made there, in order.
func allocSizes(t *testing.T, path string, from int64) []int64 {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, l := range strings.Split(string(raw[from:]), "\n") {
		// A VMM arena's allocation is its reserved range (its chunks are
		// mapped separately).
		if f := strings.Fields(l); len(f) == 3 && (f[0] == "alloc" || f[0] == "reserve") {
			n, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", path, l, err)
			}
			out = append(out, n)
		}
	}
	return out
}

// TestGPUFrozenBF16Reference makes the frozen reference of a mixed-precision
// policy two ways on the emulator and reads what each allocates in its
// allocation log: the old way (a float32 frozen clone registered with
// UseBF16: a float32 arena of P·4 bytes and its bf16 copy of P·2) and the
// frozen bf16 model (AllocBF16: one arena of P·2 bytes, no float32 arena).
// Then the bf16 model's weights must be exactly the float32 weights
// rounded to bf16, and its forward must agree with the registered copy's:
// the matmuls and the embedding read the same bf16 values, and only the
// norm weights and biases, float32 under UseBF16, are rounded here, which
// moves each op's output by at most u = 2^−8 relative; the stated bound
// on the per-token logprob is 2^−6 relative to the largest |logprob|
// (seen far below it), and the logits of a decode row likewise.
func TestGPUFrozenBF16Reference(t *testing.T) {
	g := gpuOrSkip(t)
	path := os.Getenv("R1GO_EMU_ALLOC_LOG")
	onEmu := path != "" && strings.Contains(g.Name(), "emulator")
	d, err := OpenWith(Options{Ordinal: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cfg := tinyQwen(t)
	policy, err := model.New(cfg, d, model.LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	policy.InitRandom(5)
	d.UseBF16(policy.Params)
	P := int64(policy.NumParams())
	round := func(b int64) int64 {
		b = (b + 255) &^ 255
		if d.wantVMM(int(b)) { // a VMM arena: whole chunks
			g := int64(d.vm.gran)
			b = (b + g - 1) / g * g
		}
		return b
	}

	logAt := func() int64 {
		if !onEmu {
			return 0
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	from := logAt()
	old, err := policy.CloneWith(model.LoadOptions{Frozen: true, DType: "float32"})
	if err != nil {
		t.Fatal(err)
	}
	d.UseBF16(old.Params)
	mid := logAt()
	ref, err := policy.CloneWith(model.LoadOptions{Frozen: true, DType: "bfloat16"})
	if err != nil {
		t.Fatal(err)
	}
	d.UseBF16(ref.Params)
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if onEmu {
		all, after := allocSizes(t, path, from), allocSizes(t, path, mid)
		before := all[:len(all)-len(after)]
		t.Logf("frozen reference of %d parameters: float32 clone + UseBF16 allocates %v B; frozen bf16 allocates %v B", P, before, after)
		if len(before) != 2 || before[0] != round(4*P) || before[1] != round(2*P) {
			t.Errorf("float32 frozen clone with its bf16 copy allocated %v, want [%d %d]", before, round(4*P), round(2*P))
		}
		if len(after) != 1 || after[0] != round(2*P) {
			t.Errorf("frozen bf16 reference allocated %v, want only its bf16 arena [%d] (no float32 arena)", after, round(2*P))
		}
	}
	if b, ok := ref.Params.(Buffer); !ok || b.dtype != BF16 {
		t.Fatalf("frozen bf16 reference's weights are %v, want a bf16 buffer", ref.Params)
	}
	w, rw := make([]float32, P), make([]float32, P)
	d.Download(w, policy.Params)
	d.Download(rw, ref.Params)
	for i := range w {
		if rw[i] != bf16.Round(w[i]) {
			t.Fatalf("reference weight %d = %g, want bf16(%g) = %g", i, rw[i], w[i], bf16.Round(w[i]))
		}
	}
	// Upload rounds once: a second model loaded from the same float32 values.
	up, err := model.NewWith(cfg, d, model.LMHeadOutput, model.LoadOptions{Frozen: true, DType: "bfloat16"})
	if err != nil {
		t.Fatal(err)
	}
	d.Upload(up.Params, w)
	uw := make([]float32, P)
	d.Download(uw, up.Params)
	for i := range uw {
		if uw[i] != rw[i] {
			t.Fatalf("uploaded weight %d = %g, the device-rounded copy %g", i, uw[i], rw[i])
		}
	}

	tokens := make([]int32, 96)
	for i := range tokens {
		tokens[i] = int32((i*131 + 7) % cfg.VocabSize)
	}
	b := model.Batch{Tokens: tokens, Seqs: []int32{0, 40, 96}}
	want, err := old.Forward(b, false)
	if err != nil {
		t.Fatal(err)
	}
	wantLP := append([]float32(nil), want.LogProb...)
	got, err := ref.Forward(b, false)
	if err != nil {
		t.Fatal(err)
	}
	e := relErr(got.LogProb, wantLP)
	t.Logf("frozen bf16 reference logprob vs its float32 registered twin: relative error %.3g (bound 2^-6)", e)
	if !(e <= 1.0/64) {
		t.Errorf("frozen bf16 reference logprob relative error %.3g > 2^-6", e)
	}
	c1, c2 := old.NewKVCache(1, 16), ref.NewKVCache(1, 16)
	l1, err := old.Step(c1, []model.Chunk{{Slot: 0, Tokens: tokens[:9]}})
	if err != nil {
		t.Fatal(err)
	}
	l2, err := ref.Step(c2, []model.Chunk{{Slot: 0, Tokens: tokens[:9]}})
	if err != nil {
		t.Fatal(err)
	}
	e = relErr(l2, l1)
	t.Logf("frozen bf16 reference decode logits: relative error %.3g (bound 2^-6)", e)
	if !(e <= 1.0/64) || math.IsNaN(e) {
		t.Errorf("frozen bf16 reference logits relative error %.3g > 2^-6", e)
	}
}
