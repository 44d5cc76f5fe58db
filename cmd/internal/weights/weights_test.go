package weights

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
)

// PoisonedCopy saves the warm-start fixture with one NaN planted in the
// tensor at index which of m.Tensors() and returns the folder and the
// tensor's name. Tests of the commands use it too.
func poisonedCopy(t *testing.T, which int, v float32) (string, string) {
	t.Helper()
	src := filepath.Join("..", "..", "train", "testdata", "warmstart")
	m, err := model.Load(src, cpu.New(), model.LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	host := make([]float32, m.NumParams())
	m.Dev.Download(host, m.Params)
	off := 0
	ts := m.Tensors()
	for _, s := range ts[:which] {
		n := 1
		for _, d := range s.Shape {
			n *= d
		}
		off += n
	}
	host[off+3] = v
	m.Dev.Upload(m.Params, host)
	dir := filepath.Join(t.TempDir(), "poisoned")
	if err := m.Save(dir, nil, model.SaveOptions{DType: "float32", TokenizerDir: src}); err != nil {
		t.Fatal(err)
	}
	return dir, ts[which].Name
}

func TestCheckFinite(t *testing.T) {
	if err := CheckFinite(filepath.Join("..", "..", "train", "testdata", "warmstart")); err != nil {
		t.Fatalf("clean weights refused: %v", err)
	}
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		dir, name := poisonedCopy(t, 4, v)
		err := CheckFinite(dir)
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "flat index 3") {
			t.Errorf("%v in %s: %v", v, name, err)
		}
	}
	if err := CheckFinite(t.TempDir()); err == nil {
		t.Error("a folder without weights passed")
	}
}
