package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu/gemm"
)

// OpenBLAS is an independent SGEMM: where it is installed, every gemm
// kernel must agree with it on odd shapes in all four transpose forms, which
// also checks that the benchmark calls cblas_sgemm with the right layout.
func TestOpenBLASAgreesWithGemm(t *testing.T) {
	blas, err := loadOpenBLAS()
	if err != nil {
		t.Skip(err)
	}
	blas.setThreads(1)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range []struct{ m, n, k int }{{1, 1, 1}, {17, 33, 65}, {100, 37, 129}} {
		for trans := 0; trans < 4; trans++ {
			ta, tb := trans&1 != 0, trans&2 != 0
			rowsA, colsA := s.m, s.k
			if ta {
				rowsA, colsA = s.k, s.m
			}
			rowsB, colsB := s.k, s.n
			if tb {
				rowsB, colsB = s.n, s.k
			}
			a, b := randoms(rng, rowsA*colsA), randoms(rng, rowsB*colsB)
			c0 := randoms(rng, s.m*s.n)
			want := append([]float32(nil), c0...)
			blas.Sgemm(ta, tb, s.m, s.n, s.k, 0.5, a, colsA, b, colsB, -1, want, s.n)
			for _, name := range gemm.Kernels() {
				e, err := gemm.NewEngine(name, 2)
				if err != nil {
					t.Fatal(err)
				}
				got := append([]float32(nil), c0...)
				e.Sgemm(ta, tb, s.m, s.n, s.k, 0.5, a, colsA, b, colsB, -1, got, s.n)
				// Both sum k products of values in [-1, 1) in float32.
				if d := maxRelDiff(got, want); d > float64(2*s.k+8)/(1<<24) {
					t.Errorf("%s %dx%dx%d transA=%v transB=%v: max relative difference %.2g from OpenBLAS",
						name, s.m, s.n, s.k, ta, tb, d)
				}
			}
		}
	}
	fmt.Println("compared with", blas.path)
}

// TestDecodeFlopsCountsEveryProduct checks decodeFlops at an empty context
// against the published parameter counts of Qwen2.5-0.5B and 1.5B
// (494,032,768 and 1,543,714,304) less what no product multiplies: the
// RMSNorm weights (two a layer and the final one) and the q, k, v biases.
func TestDecodeFlopsCountsEveryProduct(t *testing.T) {
	for _, c := range []struct {
		file      string
		published int64
	}{{"config_qwen2.5-0.5b.json", 494_032_768}, {"config_qwen2.5-1.5b.json", 1_543_714_304}} {
		cfg, err := model.LoadConfig(filepath.Join("..", "..", "model", "testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		h, L := int64(cfg.HiddenSize), int64(cfg.NumHiddenLayers)
		norms := L*2*h + h
		biases := L * (h + 2*int64(cfg.KVDim()))
		want := 2 * float64(c.published-norms-biases)
		if got := decodeFlops(cfg, 0); got != want {
			t.Errorf("%s: decodeFlops(ctx 0) = %.0f, want %.0f", c.file, got, want)
		}
		// Each context token adds its score and weighted sum in every head.
		perCtx := decodeFlops(cfg, 1) - decodeFlops(cfg, 0)
		if wantCtx := float64(4 * L * int64(cfg.NumAttentionHeads*cfg.HeadDim())); perCtx != wantCtx {
			t.Errorf("%s: a context token adds %.0f flops, want %.0f", c.file, perCtx, wantCtx)
		}
	}
}
