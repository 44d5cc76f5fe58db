package optim

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/safetensors"
)

// bf16Bytes views bfloat16 bit patterns as the little-endian bytes a
// safetensors file stores, without a copy where the host is little-endian.
func bf16Bytes(h []uint16) []byte {
	if len(h) == 0 {
		return []byte{}
	}
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(&h[0])), 2*len(h))
	}
	b := make([]byte, 2*len(h))
	for i, v := range h {
		binary.LittleEndian.PutUint16(b[2*i:], v)
	}
	return b
}

var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// readSpans restores one moment tensor, of the whole arena, into dst,
// which holds the optimizer's spans of it: in place when dst is host memory
// (a stored BF16 tensor into a bfloat16 buffer bit for bit), through a host
// copy otherwise.
func (o *AdamW) readSpans(f *safetensors.File, name string, dst model.Buffer) error {
	info, _ := f.Info(name)
	raw, err := f.Bytes(name)
	if err != nil {
		return err
	}
	es := info.DType.Size()
	if h, ok := model.HostBF16(o.dev, dst); ok && info.DType == safetensors.BF16 {
		k := 0
		for _, s := range o.spans {
			for i := range s.N {
				h[k+i] = binary.LittleEndian.Uint16(raw[2*(s.Off+i):])
			}
			k += s.N
		}
		return nil
	}
	host, inPlace := model.HostF32(o.dev, dst)
	if !inPlace {
		host = make([]float32, dst.Len())
	}
	if o.whole() { // the parallel conversion of a large arena
		if err := f.ReadF32(name, host); err != nil {
			return err
		}
		if !inPlace {
			o.dev.Upload(dst, host)
		}
		return nil
	}
	k := 0
	for _, s := range o.spans {
		if err := safetensors.DecodeF32(host[k:k+s.N], raw[es*s.Off:es*(s.Off+s.N)], info.DType); err != nil {
			return fmt.Errorf("optim: %s: tensor %s: %w", f.Path, name, err)
		}
		k += s.N
	}
	if !inPlace {
		o.dev.Upload(dst, host)
	}
	return nil
}
