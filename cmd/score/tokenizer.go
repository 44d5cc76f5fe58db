package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/r1go/r1go/model/tokenizer"
)

// loadEncoder loads the tokenizer in dir for {"text": ...} lines; text is
// encoded with special tokens parsed, as a chat rendering would be.
func loadEncoder(dir string) (func(string) ([]int32, error), error) {
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		return nil, fmt.Errorf("score: {\"text\": ...} lines need a tokenizer.json in %s (or -tokenizer DIR)", dir)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	return func(text string) ([]int32, error) {
		ids := tok.Encode(text)
		out := make([]int32, len(ids))
		for i, id := range ids {
			out[i] = int32(id)
		}
		return out, nil
	}, nil
}
