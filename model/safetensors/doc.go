// Package safetensors reads and writes the Hugging Face safetensors format:
// one file, or a folder of shards with a model.safetensors.index.json.
//
// A file is an 8-byte little-endian header length N, N bytes of UTF-8 JSON
// that map each tensor name to its dtype, shape and [begin, end) byte
// offsets, then the data buffer those offsets point into. The central types
// are File (one file, memory-mapped where the OS allows it) and Dir (a
// model folder, single file or sharded). Write and WriteDir lay files out
// as the reference writer does: a compact header padded with spaces to a
// multiple of 8, tensors ordered by descending dtype alignment and then by
// name (metadata keys sorted, where the reference's order is arbitrary),
// and shards with a model.safetensors.index.json as transformers writes it.
//
// Only F32, BF16 and F16 convert to and from float32. Every other dtype of
// the format is recognised (so a file holding, say, an I64 buffer still
// opens), and reading it as float32 reports ErrUnsupportedDType; a dtype
// name the format does not define is rejected when the header is parsed.
//
// Error policy: every problem with a file is an *Error that names the file
// and, where one is involved, the tensor, and wraps one of the Err* kinds so
// callers can test it with errors.Is. Opening validates the whole header the
// way the reference reader does (see ParseHeader), so every later read is
// in bounds. Byte slices returned by Bytes alias the mapping and are valid
// until Close; a file truncated by someone else while mapped faults, as
// with any mapping.
package safetensors
