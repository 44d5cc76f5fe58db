package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"

	"github.com/r1go/r1go/internal/pool"
	"github.com/r1go/r1go/model"
)

// The rollout copy's sampler. A model whose products round to bf16
// (LoadOptions.BF16Products) samples as an inference engine does: the
// softmax in float32. SampleToken's exact draw takes every e^x in
// float64 (math.Exp's bits) and sums them in order, 4-7 % of the copy's
// batch-32 decode step on 2 cores; here e^x is exp32's (within 2.5·10⁻⁷
// relative), sixteen lanes at a time, summed per lane in float32 over a
// block of sampleBlock logits and the lanes in float64, a few float32
// ulps from the exact sums. The draw still takes one Float64 from the
// draw's stream, as SampleToken does, and picks the first token whose
// running sum passes u·S: the token SampleToken picks except where u
// lies within that error of a boundary between two tokens, and a
// log-probability within about 10⁻⁶ of its. Greedy decoding and top-k or
// top-p truncation take SampleToken itself.

// SampleRows draws each row of logits on the device's threads
// (model.Sampler), timed as the device's sampling: row j with a PCG stream
// seeded by seeds[j], by sampleAll32 for a rollout copy's logits
// (model.StoreEngineLogits), else by SampleAll.
func (d *Device[F]) SampleRows(tokens []int32, logprobs []float32, logits model.Buffer, V int, s model.Sampling, seeds []uint64) error {
	defer d.timed(opSample)()
	if len(tokens) != len(seeds) || len(logprobs) != len(seeds) || logits.Len() < len(seeds)*V {
		panic(fmt.Sprintf("cpu: SampleRows of %d tokens, %d logprobs and %d seeds from %d logits of %d", len(tokens), len(logprobs), len(seeds), logits.Len(), V))
	}
	x, ok := HostFloat32(logits)
	if !ok { // the float64 device's
		x = make([]float32, logits.Len())
		d.Download(x, logits)
	}
	draws := make([]model.Draw, len(seeds))
	for j := range draws {
		draws[j] = model.Draw{Row: x[j*V : (j+1)*V], S: s, Rng: rand.New(rand.NewPCG(seeds[j], 0x5eed))}
	}
	if _, engine := logits.(engineLogits); engine {
		sampleAll32(draws)
	} else {
		model.SampleAll(draws)
	}
	for j, dr := range draws {
		tokens[j], logprobs[j] = dr.ID, dr.LogProb
	}
	return nil
}

// engineLogits are a rollout copy's decode logits (model.StoreEngineLogits):
// float32 values that SampleRows draws from with sampleAll32's float32
// softmax; every other op reads them as a float32 buffer.
type engineLogits []float32

func (b engineLogits) Len() int                      { return len(b) }
func (b engineLogits) Slice(off, n int) model.Buffer { return b[off : off+n : off+n] }

// sampleAll32 is SampleAll with the float32 first pass for the draws it
// can take (sampleable32), SampleToken for the rest.
func sampleAll32(draws []model.Draw) {
	workers := min(len(draws), runtime.GOMAXPROCS(0))
	scratch := make([][]int32, workers)
	pool.ForWorker(workers, len(draws), func(w, j int) {
		d := &draws[j]
		if sampleable32(d) {
			if id, lp, ok := sampleToken32(d.Row, d.S.Temperature, d.Rng); ok {
				d.ID, d.LogProb = id, lp
				return
			}
		}
		d.ID, d.LogProb = model.SampleToken(d.Row, d.S, d.Rng, &scratch[w])
	})
}

// sampleable32 says whether d samples the whole vocabulary at a
// temperature above 0, where the CPU has the float32 kernel.
func sampleable32(d *model.Draw) bool {
	return sample32Vector && !expNoVector && d.S.Temperature > 0 && d.S.TopP >= 1 &&
		(d.S.TopK <= 0 || d.S.TopK >= len(d.Row)) && len(d.Row) >= 16
}

// sampleToken32 draws from softmax(logits/T) with the float32 first pass;
// ok is false, with nothing drawn from rng, for a row whose largest
// logit over T is not finite or whose sum is not a positive number (a
// NaN or an infinity in it): SampleToken's rules then decide.
func sampleToken32(logits []float32, T float64, rng *rand.Rand) (int32, float32, bool) {
	top, ok := model.RowMax(logits)
	invT := float32(1 / T)
	m := top * invT
	if !ok || math.IsInf(float64(m), 0) || m != m {
		return 0, 0, false
	}
	blocks := numBlocks(len(logits))
	sc := getRow[float64](blocks)
	defer putRow(sc)
	sums := *sc
	blockSums32(logits, invT, m, sums)
	var S float64
	for _, s := range sums {
		S += s
	}
	if !(S > 0) || math.IsInf(S, 0) {
		return 0, 0, false
	}
	u := rng.Float64()
	id := drawBlock32(logits, invT, m, sums, u*S)
	logp := float64(float32(logits[id]*invT)-m) - math.Log(S)
	return int32(id), float32(logp), true
}

// blockSums32 sets sums[b] to the sum of exp32(l·invT − m) over block b
// of sampleBlock logits: lane j of sixteen adds, in float32 and in order,
// the terms at i ≡ j (mod 16) of the block's whole vectors; the lanes
// are summed in float64 (j + j+8, then j + j+4, j + j+2, 0 + 1) and the
// row's last len%16 terms added to the last block one by one. The vector
// kernel where the CPU has it, the same bits.
func blockSums32(logits []float32, invT, m float32, sums []float64) {
	n16 := len(logits) &^ 15
	if sample32Vector && !expNoVector && n16 > 0 {
		sumExp32BlocksAVX512(&logits[0], n16, model.SampleBlock, invT, m, &expConsts, &sums[0])
	} else {
		for b := 0; b*model.SampleBlock < n16; b++ {
			var lane [16]float32
			blk := logits[b*model.SampleBlock : min((b+1)*model.SampleBlock, n16)]
			for i, l := range blk {
				lane[i%16] += exp32Arg(l, invT, m)
			}
			var d [8]float64
			for j := range 8 {
				d[j] = float64(lane[j]) + float64(lane[j+8])
			}
			for j := range 4 {
				d[j] += d[j+4]
			}
			for j := range 2 {
				d[j] += d[j+2]
			}
			sums[b] = d[0] + d[1]
		}
	}
	clear(sums[numBlocks(n16):]) // a last block of fewer than sixteen: its terms below
	for i := n16; i < len(logits); i++ {
		sums[len(sums)-1] += float64(exp32Arg(logits[i], invT, m))
	}
}

// exp32Arg is one term of the float32 pass: exp32 of l·invT − m, two
// float32 roundings, 0 below expLo as the vector kernels give it.
func exp32Arg(l, invT, m float32) float32 {
	x := float32(l*invT) - m
	if x < expLo {
		return 0
	}
	return exp32(x)
}

// drawBlock32 is the first token whose running sum passes target: the
// block is found from the block sums, then its terms are taken again
// (the same float32 values) and summed in float64 from the block's
// start. Rounding can leave the target past the block's own running
// sum, or past every block: the block's, or the row's, last token with a
// term above 0 then.
func drawBlock32(logits []float32, invT, m float32, sums []float64, target float64) int {
	var start float64
	b := len(sums) - 1
	for j, s := range sums {
		if start+s > target {
			b = j
			break
		}
		if j < len(sums)-1 {
			start += s
		}
	}
	for ; b >= 0; b-- {
		i0 := b * model.SampleBlock
		blk := logits[i0:min(i0+model.SampleBlock, len(logits))]
		run, last := start, -1
		for i, l := range blk {
			e := exp32Arg(l, invT, m)
			if e > 0 {
				last = i0 + i
			}
			run += float64(e)
			if run > target {
				return i0 + i
			}
		}
		if last >= 0 {
			return last
		}
		if b > 0 {
			start -= sums[b-1]
		}
	}
	return model.ArgMax(logits)
}

// numBlocks is how many blocks of model.SampleBlock logits a row of n
// holds.
func numBlocks(n int) int { return (n + model.SampleBlock - 1) / model.SampleBlock }
