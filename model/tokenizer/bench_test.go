package tokenizer

import (
	"os"
	"path/filepath"
	"testing"
)

// benchCorpus is the package's own source: English comments and code.
func benchCorpus(b *testing.B) ([]string, int64) {
	paths, _ := filepath.Glob("*.go")
	var docs []string
	var size int64
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		docs = append(docs, string(data))
		size += int64(len(data))
	}
	return docs, size
}

// BenchmarkEncode is one goroutine encoding; the speed against
// transformers.js is measured by benchmarks/tokenizer.
func BenchmarkEncode(b *testing.B) {
	tok := loadFixture(b, "qwen2")
	docs, size := benchCorpus(b)
	b.SetBytes(size)
	for b.Loop() {
		for _, d := range docs {
			tok.Encode(d)
		}
	}
}

func BenchmarkEncodeBatch(b *testing.B) {
	tok := loadFixture(b, "qwen2")
	docs, size := benchCorpus(b)
	b.SetBytes(size)
	for b.Loop() {
		tok.EncodeBatch(docs)
	}
}

func BenchmarkDecode(b *testing.B) {
	tok := loadFixture(b, "qwen2")
	docs, size := benchCorpus(b)
	ids := tok.EncodeBatch(docs)
	b.SetBytes(size)
	for b.Loop() {
		for _, x := range ids {
			tok.DecodeText(x)
		}
	}
}
