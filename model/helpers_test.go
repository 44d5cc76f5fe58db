package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Test helpers that model/cpu's tests have too.

func dotF(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// fdCheck perturbs each element of x (in place), re-evaluates loss, and
// compares the central difference with analytic[i].
func fdCheck(t *testing.T, name string, x []float64, loss func() float64, analytic []float64) {
	t.Helper()
	const h = 1e-6
	var worst, scale float64
	for _, g := range analytic {
		scale = math.Max(scale, math.Abs(g))
	}
	for i := range x {
		old := x[i]
		x[i] = old + h
		lp := loss()
		x[i] = old - h
		lm := loss()
		x[i] = old
		num := (lp - lm) / (2 * h)
		if math.IsNaN(analytic[i]) || math.IsNaN(num) {
			t.Fatalf("%s[%d]: NaN (analytic %v, numeric %v)", name, i, analytic[i], num)
		}
		worst = math.Max(worst, math.Abs(num-analytic[i]))
	}
	if rel := worst / math.Max(scale, 1e-12); rel > 1e-6 {
		t.Errorf("%s: max |numeric − analytic| = %.3g, %.3g of the largest gradient (bound 1e-6)", name, worst, rel)
	}
}

func sameBits(t *testing.T, what string, a, b []float32) {
	t.Helper()
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("%s[%d] = %g with the vector exp, %g element by element", what, i, a[i], b[i])
		}
	}
}

// runBoth runs f with the vector exp and again element by element
// (expNoVector) and returns both results.
func runBoth[T any](f func() T) (vector, scalar T) {
	defer func() { expNoVector = false }()
	expNoVector = false
	vector = f()
	expNoVector = true
	scalar = f()
	return
}

func randF32(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(scale * rng.NormFloat64())
	}
	return v
}
