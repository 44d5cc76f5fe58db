package bf16

import (
	"math"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, c := range []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // a tie rounds to even (down)
		{math.Float32frombits(0x3f818000), 0x3f82}, // a tie rounds to even (up)
		{math.Float32frombits(0x3f808001), 0x3f81}, // past the tie rounds up
		{math.MaxFloat32, 0x7f80},                  // overflow is +Inf
		{float32(math.Inf(-1)), 0xff80},
		{math.Float32frombits(0x7f800001), 0x7fc0}, // a low-payload NaN stays a NaN
	} {
		if got := FromFloat32(c.in); got != c.want {
			t.Errorf("FromFloat32(%#x) = %#x, want %#x", math.Float32bits(c.in), got, c.want)
		}
	}
	for h := range 1 << 16 {
		if f := ToFloat32(uint16(h)); f == f && FromFloat32(f) != uint16(h) {
			t.Fatalf("%#x does not survive a round trip", h)
		}
	}
}
