package optim

import (
	"encoding/binary"
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

// readInto restores one moment tensor into dst: in place when dst is host
// memory (a stored BF16 tensor into a bfloat16 buffer bit for bit),
// through a host copy otherwise.
func readInto(dev model.Device, f *safetensors.File, name string, dst model.Buffer) error {
	info, _ := f.Info(name)
	if h, ok := model.HostBF16(dst); ok && info.DType == safetensors.BF16 {
		raw, err := f.Bytes(name)
		if err != nil {
			return err
		}
		for i := range h {
			h[i] = binary.LittleEndian.Uint16(raw[2*i:])
		}
		return nil
	}
	if host, ok := model.HostF32(dst); ok {
		return f.ReadF32(name, host)
	}
	host := make([]float32, dst.Len())
	if err := f.ReadF32(name, host); err != nil {
		return err
	}
	dev.Upload(dst, host)
	return nil
}
