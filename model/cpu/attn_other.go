//go:build !amd64

package cpu

var attnVector = false

// No grouped kernels off amd64: AttentionCached runs its loops.
func attnKernelSets() []*attnKernels { return nil }

func dotsGroupAVX512(qp, k *float32, ldk uintptr, n, chunks int, out, pv *float32) {
	panic("cpu: no vector attention kernel")
}

func axpyGroupF64AVX512(acc *float64, v *float32, ldv uintptr, e *float64, n, hs, nh int) {
	panic("cpu: no vector attention kernel")
}

func scoresGroupAVX512(sc *float32, p *float64, n int, scale float64, m *[8]float64) bool {
	panic("cpu: no vector attention kernel")
}

func argsGroupAVX512(p *float64, arg *float32, n int, m *[8]float64) {
	panic("cpu: no vector attention kernel")
}

func weightsGroupAVX512(ex *float32, p *float64, n int, sum *[8]float64) {
	panic("cpu: no vector attention kernel")
}

func dotsGroupBF16AVX512(qp *float32, k *uint16, ldk uintptr, n, chunks int, out *float32, pv *uint16) {
	panic("cpu: no vector attention kernel")
}

func axpyOutBF16AVX512(out *float32, v *uint16, ldv uintptr, e *float32, n, hs, nh int, r *[8]float64) {
	panic("cpu: no vector attention kernel")
}

func packQBF16AVX512(qp, q *float32, nh, hs int) {
	panic("cpu: no vector attention kernel")
}

func softmaxGroup32AVX512(sc, ex *float32, n int, scale float32, c *[12]float32, sum *[8]float64) bool {
	panic("cpu: no vector attention kernel")
}
