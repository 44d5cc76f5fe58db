//go:build amd64 && !amd64.v3

package cpu

import (
	"math"
	"testing"
)

// Only where the compiler does not fuse a multiply and an add (amd64 below
// GOAMD64=v3): there the nested form is the unfused arithmetic that exp32
// now spells out. Elsewhere (arm64, GOAMD64=v3) the compiler fused the
// nested form, so its results depended on the build; exp32's no longer do
// (they are these, on every platform).

// The explicit, unfusable form of exp32 computes what its first, nested
// form computed: no float32 result of the device moved.
func TestExp32MatchesNestedForm(t *testing.T) {
	for _, x := range expInputs() {
		if got, want := exp32(x), exp32Ref(x); !sameFloat(got, want) {
			t.Fatalf("exp32(%g [%#08x]) = %g [%#08x], nested form %g [%#08x]", x, math.Float32bits(x),
				got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}

// exp32Ref is exp32 as it was first written (one nested expression); the
// test checks that the explicit form above computes the same bits.
func exp32Ref(x float32) float32 {
	if x < -87.3 {
		return 0
	}
	if x > 80 {
		return float32(math.Exp(float64(x)))
	}
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	n := float32(math.Floor(float64(x*log2e + 0.5)))
	r := x - n*ln2hi - n*ln2lo
	p := 1 + r*(1+r*(0.5+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720))))))
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}
