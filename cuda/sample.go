package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/r1go/r1go/model"
)

var (
	kSample          = kernel("sample.cu", "sample_rows", 1024)
	kSampleTruncated = kernel("sample.cu", "sample_rows_truncated", 1024)
)

// Sample draws one token per row of logits[rows, V] on the GPU and returns
// the tokens with their log-probabilities under softmax(logits/T), as
// model.SampleToken does on the host, moving 8 bytes per row instead of
// V floats. Greedy decoding (Temperature 0), plain temperature sampling
// and top-k / top-p truncation all run on the device, with the host
// sampler's distribution: the kept set is the same prefix of the tokens
// sorted by logit (ties to the lower id), found by a radix select instead
// of a sort (kernels/sample.cu). seed selects the random numbers: give
// each decode step its own.
func (d *Device) Sample(tokens []int32, logprobs []float32, logits model.Buffer, V int, s model.Sampling, seed uint64) error {
	return d.sample(tokens, logprobs, logits, V, s, seed, nil)
}

// SampleRows is Sample with one seed per row (a trajectory's own random
// stream): model.Sampler, which Model.StepSample uses to decode
// without bringing logits to the host.
func (d *Device) SampleRows(tokens []int32, logprobs []float32, logits model.Buffer, V int, s model.Sampling, seeds []uint64) error {
	if len(seeds) != len(tokens) {
		panic(fmt.Sprintf("cuda: SampleRows with %d tokens and %d seeds", len(tokens), len(seeds)))
	}
	return d.sample(tokens, logprobs, logits, V, s, 0, seeds)
}

func (d *Device) sample(tokens []int32, logprobs []float32, logits model.Buffer, V int, s model.Sampling, seed uint64, seeds []uint64) error {
	rows := len(tokens)
	if len(logprobs) != rows {
		panic(fmt.Sprintf("cuda: Sample with %d tokens and %d logprobs", rows, len(logprobs)))
	}
	if err := s.Validate(); err != nil {
		return err
	}
	pl := f32(logits, rows*V, "Sample logits")
	if rows == 0 {
		return nil
	}
	invT := float32(0)
	if s.Temperature > 0 {
		invT = float32(1 / s.Temperature)
	}
	defer d.enter()()
	out := d.scratchBuf("sample-out", 2*rows, F32) // tokens then logprobs
	var ps uintptr
	if seeds != nil {
		ps = d.ints("seeds", unsafe.Slice((*int32)(unsafe.Pointer(&seeds[0])), 2*len(seeds)))
	}
	k := V
	if s.TopK > 0 && s.TopK < V {
		k = s.TopK
	}
	if invT > 0 && (k < V || s.TopP < 1) {
		d.launch(kSampleTruncated, grid1(rows), grid1(min(1024, roundUp(V, 32))), 0, argPtr(out.ptr), argPtr(out.ptr+uintptr(4*rows)), argPtr(pl), argInt(V),
			argFloat(invT), argInt(k), math.Float64bits(s.TopP), seed, argPtr(ps)) // top_p as a double, as the host compares it
	} else {
		d.launch(kSample, grid1(rows), grid1(min(1024, roundUp(V, 32))), 0, argPtr(out.ptr), argPtr(out.ptr+uintptr(4*rows)), argPtr(pl), argInt(V), argFloat(invT), seed, argPtr(ps))
	}
	d.download(unsafe.Pointer(&tokens[0]), out.ptr, 4*rows)
	d.download(unsafe.Pointer(&logprobs[0]), out.ptr+uintptr(4*rows), 4*rows)
	err := d.err
	d.err = nil
	return err
}

var _ model.Sampler = (*Device)(nil)
