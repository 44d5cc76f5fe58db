package cuda

import (
	"fmt"
	"unsafe"

	"github.com/r1go/r1go/model"
)

var kSample = kernel("sample.cu", "sample_rows", 1024)

// Sample draws one token per row of logits[rows, V] on the GPU and returns
// the tokens with their log-probabilities under softmax(logits/T), as
// model.SampleToken does on the host, moving 8 bytes per row instead of
// V floats. Greedy decoding (Temperature 0) and plain temperature sampling
// run here; top-k and top-p truncation (top_k > 0 or top_p < 1) need a
// sort over the vocabulary and are refused with an error, so the caller
// downloads the logits and uses model.SampleToken for them. seed selects
// the random numbers: give each decode step its own.
func (d *Device) Sample(tokens []int32, logprobs []float32, logits model.Buffer, V int, s model.Sampling, seed uint64) error {
	rows := len(tokens)
	if len(logprobs) != rows {
		panic(fmt.Sprintf("cuda: Sample with %d tokens and %d logprobs", rows, len(logprobs)))
	}
	if err := s.Validate(); err != nil {
		return err
	}
	if s.TopP < 1 || (s.TopK > 0 && s.TopK < V) {
		return fmt.Errorf("cuda: Sample does not truncate (top_k %d, top_p %v); sample these on the host with model.SampleToken", s.TopK, s.TopP)
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
	d.launch(kSample, grid1(rows), grid1(min(1024, roundUp(V, 32))), 0, p(out.ptr), p(out.ptr+uintptr(4*rows)), p(pl), i(V), f(invT), seed)
	d.download(unsafe.Pointer(&tokens[0]), out.ptr, 4*rows)
	d.download(unsafe.Pointer(&logprobs[0]), out.ptr+uintptr(4*rows), 4*rows)
	err := d.err
	d.err = nil
	return err
}
