//go:build hftokenizers

package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"

	hf "github.com/daulet/tokenizers"
)

// HF is the optional backend: the same folder loaded by the Rust Hugging
// Face tokenizers library through github.com/daulet/tokenizers (cgo). It
// needs libtokenizers.a from that project on the linker path, and exists to
// cross-check the pure-Go Tokenizer (the golden tests run on both when the
// build tag hftokenizers is set). Like Tokenizer.Encode it adds no BOS/EOS.
type HF struct {
	plain    *hf.Tokenizer // special tokens parsed
	ordinary *hf.Tokenizer // split_special_tokens=True
	size     int
}

var _ Codec = (*HF)(nil)

// NewHF loads dir/tokenizer.json with the Rust library.
func NewHF(dir string) (*HF, error) {
	path := filepath.Join(dir, "tokenizer.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	// Parse it ourselves too: it validates the file with our error
	// messages and gives the id range.
	own, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	plain, err := hf.FromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: tokenizers library: %v", path, err)
	}
	ordinary, err := hf.FromBytes(data, hf.WithEncodeSpecialTokens())
	if err != nil {
		plain.Close()
		return nil, fmt.Errorf("tokenizer: %s: tokenizers library: %v", path, err)
	}
	return &HF{plain: plain, ordinary: ordinary, size: own.VocabSize()}, nil
}

func toInts(ids []uint32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// Encode is Tokenizer.Encode through the Rust library.
func (h *HF) Encode(text string) []int {
	ids, _ := h.plain.Encode(text, false)
	return toInts(ids)
}

// EncodeOrdinary is Tokenizer.EncodeOrdinary through the Rust library.
func (h *HF) EncodeOrdinary(text string) []int {
	ids, _ := h.ordinary.Encode(text, false)
	return toInts(ids)
}

// DecodeText is Tokenizer.DecodeText through the Rust library. The C
// string it passes through ends at a NUL byte, so text holding U+0000 is
// cut there.
func (h *HF) DecodeText(ids []int) string {
	u := make([]uint32, 0, len(ids))
	for _, id := range ids {
		if id >= 0 && id < h.size {
			u = append(u, uint32(id))
		}
	}
	return h.plain.Decode(u, false)
}

// VocabSize is Tokenizer.VocabSize of the same file.
func (h *HF) VocabSize() int { return h.size }

// Close frees the Rust tokenizers.
func (h *HF) Close() error {
	h.ordinary.Close()
	return h.plain.Close()
}
