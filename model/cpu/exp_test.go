package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// expInputs is a sweep of float32 bit patterns (every 1021st, both signs:
// about 8.4 M values covering every binade), the boundaries of exp32's
// branches and their neighbours, and the special values.
func expInputs() []float32 {
	var xs []float32
	for b := uint64(0); b < 1<<32; b += 1021 {
		xs = append(xs, math.Float32frombits(uint32(b)))
	}
	for _, c := range []float32{expLo, expHi, 0, -0.5, 0.5, -87.33655, 88.72, -103.97, 1e-30} {
		x := c
		for range 40 { // walk 20 ulps each side
			x = math.Nextafter32(x, float32(math.Inf(-1)))
		}
		for range 80 {
			xs = append(xs, x, -x)
			x = math.Nextafter32(x, float32(math.Inf(1)))
		}
	}
	return append(xs, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.Float32frombits(0x7fc01234), math.Float32frombits(0xffa00001))
}

// sameFloat: equal bits, or both NaN.
func sameFloat(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// Every vector kernel of this CPU gives exp32's bits in every lane, and
// expInto (kernel + reported lanes + tail) does for slices of every
// length modulo the lane count.
func TestExpIntoBitForBit(t *testing.T) {
	xs := expInputs()
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
	want := make([]float32, len(xs))
	for i, x := range xs {
		want[i] = exp32(x)
	}
	check := func(name string, got []float32, off int) {
		t.Helper()
		for i, g := range got {
			if w := want[off+i]; !sameFloat(g, w) {
				x := xs[off+i]
				t.Fatalf("%s: exp(%g [%#08x]) = %g [%#08x], exp32 gives %g [%#08x]", name, x, math.Float32bits(x),
					g, math.Float32bits(g), w, math.Float32bits(w))
			}
		}
	}
	for name, k := range expKernels() {
		n := len(xs) / k.lanes * k.lanes
		got := make([]float32, n)
		special := k.run(&got[0], &xs[0], n, &expConsts)
		reported := false
		for i, x := range xs[:n] {
			if !(x <= expHi) {
				reported = true
				got[i] = exp32(x) // the lanes the kernel hands back
			}
		}
		if special != reported {
			t.Fatalf("%s: reported special lanes = %v, want %v", name, special, reported)
		}
		check(name, got, 0)
		// A range with nothing to report says so.
		in := []float32{-1, 0, 1, 79, -80, -100, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
		if k.run(&got[0], &in[0], len(in)/k.lanes*k.lanes, &expConsts) {
			t.Fatalf("%s reported a special lane in %v", name, in)
		}
	}
	got := make([]float32, 40)
	for off := 0; off+40 <= len(xs) && off < 4000; off += 37 {
		for n := 0; n <= 40; n++ {
			expInto(got[:n], xs[off:off+n])
			check("expInto", got[:n], off)
		}
	}
	got = make([]float32, len(xs))
	expInto(got, xs)
	check("expInto (all)", got, 0)
}

// exp32 stays within its stated accuracy of e^x on x ≤ 0, and expInto
// for the float64 device is math.Exp.
func TestExp32Accuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		x := -float32(r.Float64() * 87)
		got, want := float64(exp32(x)), math.Exp(float64(x))
		if math.Abs(got-want) > 2.5e-7*want+1e-45 {
			t.Fatalf("exp32(%g) = %g, e^x = %g: relative error %.2g", x, got, want, math.Abs(got-want)/want)
		}
	}
	d := []float64{-1, 0, 0.5, -700}
	out := make([]float64, len(d))
	expInto(out, d)
	for i, x := range d {
		if out[i] != math.Exp(x) {
			t.Fatalf("float64 expInto(%g) = %g, want math.Exp's %g", x, out[i], math.Exp(x))
		}
	}
}
