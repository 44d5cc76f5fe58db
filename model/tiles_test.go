package model

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/r1go/r1go/model/cpu/gemm"
)

// TestRolloutCopyTileLayout: a rollout copy whose matrices are in the
// tile layout computes the same bits as the same copy in rows on the same
// (AMX) path: the logits of a prefill of three sequences (43 tokens: a
// whole block of 32 rows of A and a partial one) and of decode steps, a
// scoring Forward (the LM head in chunks), after CopyWeightsFrom of a
// changed policy and after DiscardWeights; tied and untied LM heads, a
// vocabulary of 515 (16 blocks and 3 ragged rows). Where the CPU has no
// AMX the path runs with the tile instruction's arithmetic in Go
// (gemm.EmulateAMX). Such a copy refuses to be a source.
func TestRolloutCopyTileLayout(t *testing.T) {
	if !gemm.TileLayout() {
		restore, ok := gemm.EmulateAMX()
		if !ok {
			t.Skip("no AVX512_BF16: no AMX path, real or emulated")
		}
		t.Cleanup(restore)
	}
	cfg0, err := LoadConfig(filepath.Join("testdata", "golden", "qwen2_tied", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tied := range []bool{true, false} {
		t.Run(fmt.Sprintf("tied=%v", tied), func(t *testing.T) {
			cfg := *cfg0
			cfg.HiddenSize, cfg.IntermediateSize, cfg.VocabSize, cfg.NumHiddenLayers = 128, 320, 515, 2
			cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDimOverride = 4, 2, 0
			cfg.TieWordEmbeddings = tied
			pol, err := New(&cfg, NewCPU(), LMHeadOutput)
			if err != nil {
				t.Fatal(err)
			}
			pol.InitRandom(5)
			opt := LoadOptions{Frozen: true, DType: "bfloat16", BF16Products: true}
			*TileLayoutOff = true
			rows, err := pol.CloneWith(opt)
			*TileLayoutOff = false
			if err != nil {
				t.Fatal(err)
			}
			tiles, err := pol.CloneWith(opt)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows.tiles) > 0 || len(tiles.tiles) == 0 {
				t.Fatalf("tile layout: rows copy %v, tiles copy %v", len(rows.tiles) > 0, len(tiles.tiles) > 0)
			}
			for i, b := range tiles.tiles {
				if b.tile.Len() == 0 {
					t.Fatalf("matrix %d of the tile layout is empty", i)
				}
			}
			if n := len(tiles.tiles); n != 4*cfg.NumHiddenLayers+1 {
				t.Fatalf("%d matrices in the tile layout, want %d", n, 4*cfg.NumHiddenLayers+1)
			}
			same := func(what string) {
				t.Helper()
				want, got := tileRunOutputs(t, rows, cfg.VocabSize), tileRunOutputs(t, tiles, cfg.VocabSize)
				if len(got) != len(want) {
					t.Fatalf("%s: %d values from the tile layout, %d from rows", what, len(got), len(want))
				}
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s: value %d is %g from the tile layout, %g from rows", what, i, got[i], want[i])
					}
				}
			}
			same("after CloneWith")

			w, _ := HostFloat32(pol.Params)
			for i := range w {
				w[i] *= -0.75
			}
			tiles.DiscardWeights()
			for _, m := range []*Model{rows, tiles} {
				if err := m.CopyWeightsFrom(pol); err != nil {
					t.Fatal(err)
				}
			}
			same("after CopyWeightsFrom")

			if _, err := tiles.CloneWith(LoadOptions{}); err == nil {
				t.Error("CloneWith of a copy in the tile layout was taken")
			}
			if err := rows.CopyWeightsFrom(tiles); err == nil {
				t.Error("CopyWeightsFrom a copy in the tile layout was taken")
			}
		})
	}
}

// tileRunOutputs returns m's logits over a prefill of three sequences and four
// decode steps, then its log-probabilities and entropies over a scoring
// Forward of the same tokens.
func tileRunOutputs(t *testing.T, m *Model, V int) []float32 {
	t.Helper()
	c := m.NewKVCache(3, 64)
	defer c.Free(m.Dev)
	seq := func(n, seed int) []int32 {
		s := make([]int32, n)
		for i := range s {
			s[i] = int32((i*131 + seed*17) % V)
		}
		return s
	}
	chunks := []Chunk{{Slot: 0, Tokens: seq(20, 1)}, {Slot: 1, Tokens: seq(9, 2)}, {Slot: 2, Tokens: seq(14, 3)}}
	var all []float32
	for step := range 5 {
		l, err := m.Step(c, chunks)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, l...)
		for s := range chunks {
			chunks[s].Tokens = []int32{int32((step*37 + s*11 + V - 3) % V)} // ids in the ragged rows too
		}
	}
	b := Batch{Tokens: append(seq(20, 1), seq(14, 3)...), Seqs: []int32{0, 20, 34}}
	out, err := m.Forward(b, false)
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, out.LogProb...)
	return append(all, out.Entropy...)
}
