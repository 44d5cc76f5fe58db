package safetensors

import (
	"math"
	"testing"

	"github.com/r1go/r1go/internal/bf16"
)

// golden holds torch's conversions, written by testdata/make_fixtures.py.
type golden struct {
	in, bf16, f16 []uint32 // f32 input bits; torch's bf16 and f16 bits of it
	f16All        []uint16 // all 65536 16-bit patterns
	f32OfF16      []uint32 // torch float16 -> float32 of each pattern
	f32OfBF16     []uint32 // torch bfloat16 -> float32 of each pattern
}

func loadGolden(t *testing.T) golden {
	t.Helper()
	f, err := Open("testdata/golden_conv.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u32 := func(name string) []uint32 {
		b, err := f.Bytes(name)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]uint32, len(b)/4)
		for i := range out {
			out[i] = uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24
		}
		return out
	}
	u16 := func(name string) []uint32 {
		b, err := f.Bytes(name)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]uint32, len(b)/2)
		for i := range out {
			out[i] = uint32(b[2*i]) | uint32(b[2*i+1])<<8
		}
		return out
	}
	g := golden{in: u32("f32_in"), bf16: u16("bf16_of_f32_in"), f16: u16("f16_of_f32_in"),
		f32OfF16: u32("f32_of_f16_all"), f32OfBF16: u32("f32_of_bf16_all")}
	for _, v := range u16("f16_all") {
		g.f16All = append(g.f16All, uint16(v))
	}
	if len(g.in) < 10000 || len(g.f16All) != 65536 {
		t.Fatalf("golden file too small: %d inputs, %d patterns", len(g.in), len(g.f16All))
	}
	return g
}

func isNaN32(b uint32) bool   { return b&0x7fffffff > 0x7f800000 }
func isNaNF16(h uint16) bool  { return h&0x7fff > 0x7c00 }
func isNaNBF16(h uint16) bool { return h&0x7fff > 0x7f80 }

func TestNarrowingMatchesTorch(t *testing.T) {
	g := loadGolden(t)
	var badBF, badF16 int
	for i, in := range g.in {
		f := math.Float32frombits(in)
		bf, hf := bf16.FromFloat32(f), F32ToF16(f)
		if isNaN32(in) {
			// torch canonicalises NaN payloads differently per code path;
			// what must hold is that a NaN stays a NaN.
			if !isNaNBF16(bf) || !isNaNF16(hf) {
				t.Errorf("NaN %#08x became bf16 %#04x, f16 %#04x", in, bf, hf)
			}
			continue
		}
		if uint32(bf) != g.bf16[i] {
			if badBF++; badBF <= 5 {
				t.Errorf("bf16(%#08x = %g) = %#04x, torch %#04x", in, f, bf, g.bf16[i])
			}
		}
		if uint32(hf) != g.f16[i] {
			if badF16++; badF16 <= 5 {
				t.Errorf("f16(%#08x = %g) = %#04x, torch %#04x", in, f, hf, g.f16[i])
			}
		}
	}
	if badBF+badF16 > 0 {
		t.Errorf("%d bf16 and %d f16 mismatches of %d inputs", badBF, badF16, len(g.in))
	}
}

func TestWideningMatchesTorch(t *testing.T) {
	g := loadGolden(t)
	for i, h := range g.f16All {
		got := math.Float32bits(F16ToF32(h))
		if isNaNF16(h) {
			if !isNaN32(got) || got&0x00400000 == 0 || got>>31 != uint32(h>>15) {
				t.Errorf("f16 NaN %#04x widened to %#08x: want a quiet NaN of the same sign", h, got)
			}
		} else if got != g.f32OfF16[i] {
			t.Errorf("f16 %#04x widened to %#08x, torch %#08x", h, got, g.f32OfF16[i])
		}
		got = math.Float32bits(bf16.ToFloat32(h))
		if isNaNBF16(h) {
			if !isNaN32(got) {
				t.Errorf("bf16 NaN %#04x widened to %#08x", h, got)
			}
		} else if got != g.f32OfBF16[i] {
			t.Errorf("bf16 %#04x widened to %#08x, torch %#08x", h, got, g.f32OfBF16[i])
		}
	}
}

// Every non-NaN 16-bit value must survive widening then narrowing.
func TestConversionRoundTripAllPatterns(t *testing.T) {
	for p := 0; p < 1<<16; p++ {
		h := uint16(p)
		if !isNaNF16(h) {
			if back := F32ToF16(F16ToF32(h)); back != h {
				t.Errorf("f16 %#04x -> %g -> %#04x", h, F16ToF32(h), back)
			}
		}
		if !isNaNBF16(h) {
			if back := bf16.FromFloat32(bf16.ToFloat32(h)); back != h {
				t.Errorf("bf16 %#04x -> %g -> %#04x", h, bf16.ToFloat32(h), back)
			}
		}
	}
}

// Hand-computed cases, independent of torch.
func TestConversionEdgeCases(t *testing.T) {
	cases := []struct {
		name     string
		in       float32
		bf16     uint16
		f16      uint16
		nanInput bool
	}{
		{"one", 1, 0x3f80, 0x3c00, false},
		{"minus zero", float32(math.Copysign(0, -1)), 0x8000, 0x8000, false},
		// 1 + 2^-8 is halfway between bf16 1 and 1+2^-7: ties to even (1).
		{"bf16 tie to even down", 1 + 1.0/256, 0x3f80, 0x3c04, false},
		// 1 + 3*2^-8 is halfway between 1+2^-7 and 1+2^-6: ties to even (up).
		{"bf16 tie to even up", 1 + 3.0/256, 0x3f82, 0x3c0c, false},
		{"f16 max", 65504, 0x4780, 0x7bff, false},
		// 65520 is halfway between 65504 and 65536 (Inf in f16): ties to even = Inf.
		{"f16 overflow tie", 65520, 0x4780, 0x7c00, false},
		{"f16 just below overflow tie", 65519.996, 0x4780, 0x7bff, false},
		{"f16 min subnormal", float32(math.Ldexp(1, -24)), 0x3380, 0x0001, false},
		// 2^-25 is exactly half the smallest subnormal: ties to even = 0.
		{"f16 half min subnormal", float32(math.Ldexp(1, -25)), 0x3300, 0x0000, false},
		{"f16 above half min subnormal", float32(math.Ldexp(1.5, -25)), 0x3340, 0x0001, false},
		// 1.5 * 2^-24 is halfway between subnormals 1 and 2: ties to even = 2.
		{"f16 subnormal tie", float32(math.Ldexp(1.5, -24)), 0x33c0, 0x0002, false},
		{"f16 largest subnormal", float32(math.Ldexp(1023, -24)), 0x3880, 0x03ff, false}, // bf16 rounds 1023/512 up to 2
		{"f16 min normal", float32(math.Ldexp(1, -14)), 0x3880, 0x0400, false},
		{"f32 subnormal", math.Float32frombits(1), 0x0000, 0x0000, false},
		{"inf", float32(math.Inf(1)), 0x7f80, 0x7c00, false},
		{"-inf", float32(math.Inf(-1)), 0xff80, 0xfc00, false},
		{"f32 max to bf16 inf", math.MaxFloat32, 0x7f80, 0x7c00, false},
		{"signalling NaN low payload", math.Float32frombits(0x7f800001), 0, 0, true},
		{"negative NaN", math.Float32frombits(0xffc00000), 0, 0, true},
	}
	for _, c := range cases {
		bf, hf := bf16.FromFloat32(c.in), F32ToF16(c.in)
		if c.nanInput {
			if !isNaNBF16(bf) || !isNaNF16(hf) || bf&0x40 == 0 || hf&0x200 == 0 {
				t.Errorf("%s: bf16 %#04x f16 %#04x, want quiet NaNs", c.name, bf, hf)
			}
			if bf>>15 != uint16(math.Float32bits(c.in)>>31) || hf>>15 != bf>>15 {
				t.Errorf("%s: NaN sign lost: bf16 %#04x f16 %#04x", c.name, bf, hf)
			}
			continue
		}
		if bf != c.bf16 {
			t.Errorf("%s: bf16(%g) = %#04x, want %#04x", c.name, c.in, bf, c.bf16)
		}
		if hf != c.f16 {
			t.Errorf("%s: f16(%g) = %#04x, want %#04x", c.name, c.in, hf, c.f16)
		}
	}
}

func TestDecodeEncodeErrors(t *testing.T) {
	dst := make([]float32, 2)
	if err := DecodeF32(dst, make([]byte, 3), BF16); err == nil {
		t.Error("short bf16 buffer accepted")
	}
	if err := DecodeF32(dst, make([]byte, 2), I8); err == nil {
		t.Error("I8 decoded as float")
	}
	if err := EncodeF32(make([]byte, 4), dst, "X9"); err == nil {
		t.Error("unknown dtype encoded")
	}
	buf := make([]byte, 4)
	if err := EncodeF32(buf, []float32{1, -2}, F16); err != nil {
		t.Fatal(err)
	}
	if err := DecodeF32(dst, buf, F16); err != nil || dst[0] != 1 || dst[1] != -2 {
		t.Errorf("f16 encode/decode: %v %v", dst, err)
	}
}
