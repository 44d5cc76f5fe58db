package probe

import "github.com/r1go/r1go/internal/isa"

//go:noescape
func fmaAVX512(iters int)

//go:noescape
func fmaAVX2(iters int)

//go:noescape
func dotBF16AVX512(iters int)

//go:noescape
func sumAVX2(x *float32, n int) float32

func vectorLoops() []fmaLoop {
	var ls []fmaLoop
	if isa.X86.AVX512F {
		ls = append(ls, fmaLoop{isa: "avx512", flopsPerIter: 16 * 16 * 2, run: fmaAVX512})
	}
	if isa.X86.AVX2 && isa.X86.FMA {
		ls = append(ls, fmaLoop{isa: "avx2", flopsPerIter: 14 * 8 * 2, run: fmaAVX2})
	}
	return ls
}

func dotLoop() *fmaLoop {
	if !isa.X86.AVX512BF16 {
		return nil
	}
	return &fmaLoop{isa: DotBF16ISA, flopsPerIter: 16 * 16 * 2 * 2, run: dotBF16AVX512}
}

func vectorSum() func([]float32) float32 {
	if !isa.X86.AVX2 {
		return sumGo
	}
	return func(x []float32) float32 {
		n := len(x) &^ 63
		s := float32(0)
		if n > 0 {
			s = sumAVX2(&x[0], n)
		}
		return s + sumGo(x[n:])
	}
}
