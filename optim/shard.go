package optim

import (
	"fmt"
	"strconv"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/safetensors"
)

// Sharded state (ZeRO-1). An AdamW may update only some runs (Spans) of a
// parameter arena: it reads those runs of the gradient arena and its
// moments hold just those values, packed back to back, so a rank of N
// keeps about 1/N of the moments. The update
// is Step's own, span by span (AdamW is elementwise, so a shard's values
// are those of the whole-arena update bit for bit); the gradient norm is
// the caller's (StepNorm), since it spans every rank. The optimizer-state
// file stays the whole arena's: Shard copies a shard's moments to the host,
// SaveShards writes every shard's into the file Save writes, and Load keeps
// a shard's spans of it, so any world size resumes from any other.

// Span is the run [Off, Off+N) of a parameter arena.
type Span struct{ Off, N int }

// NewShard returns an optimizer that updates the spans of params (in
// place, in increasing order, not overlapping) from the same spans of
// grads, laid out as params; only the spans' moments are allocated.
func NewShard(dev model.Device, params, grads model.Buffer, spans []Span, cfg Config, totalSteps int) (*AdamW, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	own, end := 0, 0
	for _, s := range spans {
		if s.Off < end || s.N < 0 || s.Off+s.N > params.Len() {
			return nil, fmt.Errorf("optim: span [%d, %d) is out of order or outside the %d parameters", s.Off, s.Off+s.N, params.Len())
		}
		end = s.Off + s.N
		own += s.N
	}
	if grads.Len() != params.Len() {
		return nil, fmt.Errorf("optim: %d parameters but %d gradients", params.Len(), grads.Len())
	}
	o := &AdamW{Config: cfg, TotalSteps: totalSteps, dev: dev, params: params, grads: grads, spans: spans}
	var err error
	if o.m, err = o.alloc(max(own, 1)); err != nil {
		return nil, err
	}
	o.v, _ = o.alloc(max(own, 1))
	o.m, o.v = o.m.Slice(0, own), o.v.Slice(0, own)
	return o, nil
}

// NewShardPacked is NewShard for a rank that holds only its shard of the
// gradients (ZeRO-2): grads has one value per value of the spans, packed in
// their order as the moments are, and the arena's gradients are never read.
func NewShardPacked(dev model.Device, params, grads model.Buffer, spans []Span, cfg Config, totalSteps int) (*AdamW, error) {
	own := 0
	for _, s := range spans {
		own += s.N
	}
	if grads.Len() != own {
		return nil, fmt.Errorf("optim: a packed gradient shard of %d values for spans of %d", grads.Len(), own)
	}
	// NewShard checks the spans against a gradient arena laid out as
	// params; the packed buffer replaces it once they pass.
	o, err := NewShard(dev, params, params, spans, cfg, totalSteps)
	if err != nil {
		return nil, err
	}
	o.grads, o.packed = grads, true
	return o, nil
}

// whole says whether the optimizer updates the whole arena.
func (o *AdamW) whole() bool {
	return !o.packed && len(o.spans) == 1 && o.spans[0] == Span{0, o.params.Len()}
}

// Grads is the gradient arena the optimizer reads (its spans of it), or
// its packed gradient shard (NewShardPacked).
func (o *AdamW) Grads() model.Buffer { return o.grads }

// Spans are the runs of the arena this optimizer updates.
func (o *AdamW) Spans() []Span { return o.spans }

// Shard is a shard's moments on the host: little-endian values of DType
// (F32, or BF16 for bfloat16 moments in host memory), packed in the order
// of Spans.
type Shard struct {
	Spans []Span
	DType safetensors.DType
	M, V  []byte
}

// Shard returns a copy of the moments on the host.
func (o *AdamW) Shard() Shard {
	s := Shard{Spans: o.spans, DType: safetensors.F32}
	for i, b := range []model.Buffer{o.m, o.v} {
		var raw []byte
		if h, ok := model.HostBF16(o.dev, b); ok {
			s.DType, raw = safetensors.BF16, append([]byte(nil), bf16Bytes(h)...)
		} else {
			host, ok := model.HostF32(o.dev, b)
			if !ok {
				host = make([]float32, b.Len())
				o.dev.Download(host, b)
			}
			raw = make([]byte, 4*len(host))
			safetensors.EncodeF32(raw, host, safetensors.F32)
		}
		if i == 0 {
			s.M = raw
		} else {
			s.V = raw
		}
	}
	return s
}

// SaveShards writes the file Save writes from the shards of every rank,
// which together cover the arena, with this optimizer's step count.
func (o *AdamW) SaveShards(path string, shards []Shard) error {
	n := o.params.Len()
	if len(shards) == 0 {
		return fmt.Errorf("optim: %s: no shards to save", path)
	}
	dt := shards[0].DType
	es := dt.Size()
	m, v := make([]byte, es*n), make([]byte, es*n)
	covered := 0
	for r, s := range shards {
		own := 0
		for _, sp := range s.Spans {
			own += sp.N
		}
		if s.DType != dt || len(s.M) != es*own || len(s.V) != es*own {
			return fmt.Errorf("optim: %s: shard %d holds %d and %d bytes of %s for %d values (shard 0: %s)", path, r, len(s.M), len(s.V), s.DType, own, dt)
		}
		k := 0
		for _, sp := range s.Spans {
			if sp.Off < 0 || sp.Off+sp.N > n {
				return fmt.Errorf("optim: %s: shard %d's span [%d, %d) is outside the %d parameters", path, r, sp.Off, sp.Off+sp.N, n)
			}
			copy(m[es*sp.Off:es*(sp.Off+sp.N)], s.M[es*k:])
			copy(v[es*sp.Off:es*(sp.Off+sp.N)], s.V[es*k:])
			k += sp.N
		}
		covered += own
	}
	if covered != n {
		return fmt.Errorf("optim: %s: the shards hold %d values, the arena %d", path, covered, n)
	}
	return safetensors.WriteFile(path, []safetensors.Tensor{
		{Name: "exp_avg", DType: dt, Shape: []int{n}, Raw: m},
		{Name: "exp_avg_sq", DType: dt, Shape: []int{n}, Raw: v},
	}, map[string]string{"step": strconv.Itoa(o.step), "format": "r1go-adamw"})
}
