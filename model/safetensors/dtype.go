package safetensors

// DType is a safetensors element type, spelled as in the header ("BF16").
type DType string

// The dtypes of the format. Only F32, BF16 and F16 convert to float32.
const (
	BOOL   DType = "BOOL"
	F4     DType = "F4"
	F6E2M3 DType = "F6_E2M3"
	F6E3M2 DType = "F6_E3M2"
	U8     DType = "U8"
	I8     DType = "I8"
	F8E5M2 DType = "F8_E5M2"
	F8E4M3 DType = "F8_E4M3"
	F8E8M0 DType = "F8_E8M0"
	I16    DType = "I16"
	U16    DType = "U16"
	F16    DType = "F16"
	BF16   DType = "BF16"
	I32    DType = "I32"
	U32    DType = "U32"
	F32    DType = "F32"
	C64    DType = "C64"
	F64    DType = "F64"
	I64    DType = "I64"
	U64    DType = "U64"
)

// dtypeOrder lists every known dtype in the reference implementation's enum
// order, which is increasing alignment; the writer sorts by it descending.
var dtypeOrder = []struct {
	d    DType
	bits int
}{
	{BOOL, 8}, {F4, 4}, {F6E2M3, 6}, {F6E3M2, 6}, {U8, 8}, {I8, 8},
	{F8E5M2, 8}, {F8E4M3, 8}, {F8E8M0, 8}, {I16, 16}, {U16, 16},
	{F16, 16}, {BF16, 16}, {I32, 32}, {U32, 32}, {F32, 32}, {C64, 64},
	{F64, 64}, {I64, 64}, {U64, 64},
}

// dtypeRank maps a dtype to its position in dtypeOrder.
var dtypeRank = func() map[DType]int {
	m := make(map[DType]int, len(dtypeOrder))
	for i, e := range dtypeOrder {
		m[e.d] = i
	}
	return m
}()

// Known reports whether the format defines d.
func (d DType) Known() bool {
	_, ok := dtypeRank[d]
	return ok
}

// Bits is the width of one element in bits, 0 for an unknown dtype.
func (d DType) Bits() int {
	i, ok := dtypeRank[d]
	if !ok {
		return 0
	}
	return dtypeOrder[i].bits
}

// Size is the width of one element in bytes, 0 for an unknown dtype or for
// the sub-byte dtypes (F4, F6_*), whose sizes are only defined per tensor.
func (d DType) Size() int {
	b := d.Bits()
	if b%8 != 0 {
		return 0
	}
	return b / 8
}

// Float reports whether d converts to and from float32 in this package.
func (d DType) Float() bool {
	return d == F32 || d == BF16 || d == F16
}

// ParseDType maps a Hugging Face torch_dtype name ("bfloat16", "float32",
// "float16", with or without a "torch." prefix) to a dtype.
func ParseDType(torchName string) (DType, bool) {
	switch torchName {
	case "bfloat16", "torch.bfloat16":
		return BF16, true
	case "float32", "float", "torch.float32":
		return F32, true
	case "float16", "half", "torch.float16":
		return F16, true
	}
	return "", false
}
