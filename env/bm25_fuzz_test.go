package env

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpenIndex: a damaged index file is refused with an error, never a
// panic, and whatever opens can be searched.
func FuzzOpenIndex(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, "seed.bm25")
	cr := newFixtureReader(f)
	if _, err := BuildIndex(cr, path, BuildOptions{}); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed, 0, byte(0))
	f.Add(seed, 4500, byte(1))
	f.Add(seed[:5000], 0, byte(0))
	f.Fuzz(func(t *testing.T, b []byte, at int, x byte) {
		b = append([]byte(nil), b...)
		if len(b) > 0 && at >= 0 {
			b[at%len(b)] ^= x
		}
		p := filepath.Join(t.TempDir(), "f.bm25")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		ix, err := OpenIndex(p, DefaultBM25)
		if err != nil {
			return
		}
		defer ix.Close()
		for _, q := range []string{"Marie Curie", "Warsaw Poland capital", "zzz"} {
			ix.Search(q, 3) // may fail on a damaged passage record, must not panic
		}
	})
}
