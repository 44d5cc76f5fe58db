package rl

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// chunkTokens is the work unit of the loss kernels: runs of whole sequences
// of about this many tokens. The split depends only on the batch layout, never
// on the number of threads, and partial sums are added in chunk order, so a
// loss is bit-for-bit the same on any machine.
const chunkTokens = 1 << 15

// seqChunks splits the sequences of b into consecutive runs [lo, hi) of about
// chunkTokens tokens each.
func seqChunks(b *Batch) [][2]int {
	var out [][2]int
	S := b.NumSeqs()
	lo := 0
	for lo < S {
		hi := lo + 1
		for hi < S && b.Offsets[hi+1]-b.Offsets[lo] <= chunkTokens {
			hi++
		}
		out = append(out, [2]int{lo, hi})
		lo = hi
	}
	return out
}

// forChunks runs kernel over every chunk of b, in parallel when there are
// several, each chunk with its own accumulator of nacc float64s, and returns
// the accumulators summed in chunk order.
func forChunks(b *Batch, nacc int, kernel func(lo, hi int, acc []float64)) []float64 {
	ch := seqChunks(b)
	accs := make([]float64, len(ch)*nacc)
	workers := min(runtime.GOMAXPROCS(0), len(ch))
	if workers <= 1 {
		for k, c := range ch {
			kernel(c[0], c[1], accs[k*nacc:(k+1)*nacc])
		}
	} else {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					k := int(next.Add(1) - 1)
					if k >= len(ch) {
						return
					}
					kernel(ch[k][0], ch[k][1], accs[k*nacc:(k+1)*nacc])
				}
			})
		}
		wg.Wait()
	}
	total := make([]float64, nacc)
	for k := range ch {
		for j := range total {
			total[j] += accs[k*nacc+j]
		}
	}
	return total
}
