package safetensors

import (
	"errors"
	"fmt"
)

// Kinds of format errors; every *Error wraps exactly one of them.
var (
	ErrHeaderTooSmall   = errors.New("file shorter than the 8-byte header length")
	ErrHeaderTooLarge   = errors.New("header length over 100,000,000 bytes")
	ErrHeaderLength     = errors.New("header length runs past the end of the file")
	ErrHeaderUTF8       = errors.New("header is not valid UTF-8")
	ErrHeaderJSON       = errors.New("header is not a valid JSON object")
	ErrDuplicate        = errors.New("duplicate key")
	ErrMetadata         = errors.New("__metadata__ must map strings to strings")
	ErrUnknownDType     = errors.New("unknown dtype")
	ErrUnsupportedDType = errors.New("dtype not supported for float32 conversion")
	ErrInvalidOffset    = errors.New("data offsets do not tile the buffer")
	ErrSizeMismatch     = errors.New("byte range does not match shape and dtype")
	ErrOverflow         = errors.New("shape size overflows")
	ErrIncompleteBuffer = errors.New("file length does not match the header")
	ErrNotFound         = errors.New("tensor not found")
	ErrIndex            = errors.New("invalid shard index")
	ErrLength           = errors.New("buffer length does not match the tensor")
	ErrInvalidTensor    = errors.New("invalid tensor to write")
)

// Error is a problem with one safetensors file or index. File is the path
// ("" when bytes were parsed without one), Tensor the tensor involved ("" for
// a whole-file problem), Kind one of the Err* values above.
type Error struct {
	File   string
	Tensor string
	Kind   error
	Detail string
}

func (e *Error) Error() string {
	s := "safetensors: "
	if e.File != "" {
		s += e.File + ": "
	}
	if e.Tensor != "" {
		s += fmt.Sprintf("tensor %q: ", e.Tensor)
	}
	s += e.Kind.Error()
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

// Unwrap lets errors.Is match the Kind.
func (e *Error) Unwrap() error { return e.Kind }

func newError(file, tensor string, kind error, format string, args ...any) *Error {
	return &Error{File: file, Tensor: tensor, Kind: kind, Detail: fmt.Sprintf(format, args...)}
}
