package rl

import "math"

// The loss kernels spend most of their arithmetic in exp (the importance
// ratio, the k3 estimator). math.Exp is accurate but costs several times a
// memory pass per token, so the kernels exponentiate blocks of values with
// expDiffBlock: a table-driven exp with the same accuracy class (within 3 ulp of
// math.Exp over the kernels' range, fastexp_test.go) whose independent
// iterations overlap in the CPU.

const (
	expTableBits = 6
	expTableSize = 1 << expTableBits
	expInvLn2N   = expTableSize / math.Ln2
	// fdlibm's two-part ln 2 divided by the table size: the high part has
	// trailing zero bits, so k·expLn2NHi is exact for the k in range.
	expLn2NHi = 6.93147180369123816490e-01 / expTableSize
	expLn2NLo = 1.90821492927058770002e-10 / expTableSize
	// expShifter rounds to an integer when added: 1.5·2^52.
	expShifter = 0x1.8p52
	// expLimit keeps arguments where the result is a normal float64.
	expLimit = 700
)

// expTable[j] = 2^(j/64).
var expTable = func() (t [expTableSize]float64) {
	for j := range t {
		t[j] = math.Exp2(float64(j) / expTableSize)
	}
	return t
}()

// expDiffBlock sets dst[i] = e^clamp(a[i] − b[i], ±lim) for i < len(dst),
// lim ≤ 700. A NaN difference gives an unspecified dst[i]; the kernels
// reject NaN inputs through their own checks before using the result.
//
// e^x = 2^(k/64)·e^r with k = round(64x/ln 2) and |r| ≤ ln2/128; e^r is a
// degree-6 Taylor polynomial (truncation below 4e-17), 2^(k/64) a table entry
// times 2^(k>>6) added to the exponent bits.
func expDiffBlock(dst, a, b []float64, lim float64) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		x := clampf(a[i]-b[i], -lim, lim)
		kf := x*expInvLn2N + expShifter
		k := math.Float64bits(kf)
		kf -= expShifter
		r := x - kf*expLn2NHi - kf*expLn2NLo
		p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720))))))
		dst[i] = math.Float64frombits(math.Float64bits(expTable[k%expTableSize]*p) + (k>>expTableBits)<<52)
	}
}
