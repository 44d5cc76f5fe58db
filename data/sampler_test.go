package data

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
)

func mustSampler(t *testing.T, n int, cfg SamplerConfig) *Sampler {
	t.Helper()
	s, err := NewSampler(n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSamplerEpochsArePermutations(t *testing.T) {
	for _, cfg := range []SamplerConfig{
		{BatchSize: 4, Seed: 1, Shuffle: true, DropLast: true},
		{BatchSize: 4, Seed: 1, Shuffle: true},
		{BatchSize: 3, Seed: 9},
	} {
		const n = 10
		s := mustSampler(t, n, cfg)
		per := s.BatchesPerEpoch()
		wantPer := map[bool]int{true: 2, false: int(math.Ceil(float64(n) / float64(cfg.BatchSize)))}[cfg.DropLast]
		if per != wantPer {
			t.Fatalf("%+v: %d batches per epoch, want %d", cfg, per, wantPer)
		}
		var epochs [][]int
		for e := range 3 {
			if s.Epoch() != e {
				t.Fatalf("epoch %d, want %d", s.Epoch(), e)
			}
			var seen []int
			for range per {
				seen = append(seen, s.Next()...)
			}
			epochs = append(epochs, seen)
			sorted := slices.Sorted(slices.Values(seen))
			wantLen := n
			if cfg.DropLast {
				wantLen = per * cfg.BatchSize
			}
			if len(seen) != wantLen || len(slices.Compact(sorted)) != wantLen || sorted[0] < 0 || sorted[len(sorted)-1] >= n {
				t.Fatalf("%+v epoch %d dealt %v", cfg, e, seen)
			}
		}
		if cfg.Shuffle && reflect.DeepEqual(epochs[0], epochs[1]) {
			t.Errorf("%+v: two epochs in the same order", cfg)
		}
		if !cfg.Shuffle && !reflect.DeepEqual(epochs[0], []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
			t.Errorf("unshuffled order %v", epochs[0])
		}
	}
}

func TestSamplerDeterministicAndResumable(t *testing.T) {
	cfg := SamplerConfig{BatchSize: 8, Seed: 42, Shuffle: true, DropLast: true}
	a, b := mustSampler(t, 100, cfg), mustSampler(t, 100, cfg)
	var ref [][]int
	for range 40 {
		x, y := a.Next(), b.Next()
		if !reflect.DeepEqual(x, y) {
			t.Fatal("two samplers of one config differ")
		}
		ref = append(ref, x)
	}
	other := mustSampler(t, 100, SamplerConfig{BatchSize: 8, Seed: 43, Shuffle: true, DropLast: true})
	if reflect.DeepEqual(other.Next(), ref[0]) {
		t.Error("seeds 42 and 43 deal the same first batch")
	}
	// Stop at every point, save through JSON, restore into a fresh
	// sampler: it deals exactly what the original went on to deal.
	for stop := range 30 {
		s := mustSampler(t, 100, cfg)
		for range stop {
			s.Next()
		}
		blob, err := json.Marshal(s.State())
		if err != nil {
			t.Fatal(err)
		}
		var st SamplerState
		if err := json.Unmarshal(blob, &st); err != nil {
			t.Fatal(err)
		}
		if st.Batches != int64(stop) {
			t.Fatalf("state counts %d batches, want %d", st.Batches, stop)
		}
		r := mustSampler(t, 100, cfg)
		if err := r.Restore(st); err != nil {
			t.Fatal(err)
		}
		for i := stop; i < stop+10; i++ {
			if got := r.Next(); !reflect.DeepEqual(got, ref[i]) {
				t.Fatalf("restored at %d: batch %d = %v, want %v", stop, i, got, ref[i])
			}
		}
	}
}

func TestSamplerErrors(t *testing.T) {
	for _, tc := range []struct {
		n   int
		cfg SamplerConfig
	}{
		{10, SamplerConfig{BatchSize: 0}},
		{0, SamplerConfig{BatchSize: 1}},
		{3, SamplerConfig{BatchSize: 4, DropLast: true}},
	} {
		if _, err := NewSampler(tc.n, tc.cfg); err == nil {
			t.Errorf("NewSampler(%d, %+v) gave no error", tc.n, tc.cfg)
		}
	}
	cfg := SamplerConfig{BatchSize: 4, Seed: 1, Shuffle: true, DropLast: true}
	s := mustSampler(t, 10, cfg)
	good := s.State()
	for name, edit := range map[string]func(*SamplerState){
		"other n":     func(st *SamplerState) { st.N = 11 },
		"other batch": func(st *SamplerState) { st.Batch = 5 },
		"other seed":  func(st *SamplerState) { st.Seed = 2 },
		"unshuffled":  func(st *SamplerState) { st.Shuffle = false },
		"mid batch":   func(st *SamplerState) { st.Offset = 3 },
		"past drop":   func(st *SamplerState) { st.Offset = 8 }, // 8+4 > 10: the dropped tail
		"negative":    func(st *SamplerState) { st.Epoch = -1 },
	} {
		st := good
		edit(&st)
		if err := s.Restore(st); err == nil {
			t.Errorf("%s: Restore accepted %+v", name, st)
		}
	}
}

func TestPermutationIsUniform(t *testing.T) {
	// Over many seeds, each index lands in each position about equally
	// often: a chi-square over a 5x5 table, 24,000 draws.
	const n, draws = 5, 24000
	var counts [n][n]float64
	for seed := range uint64(draws) {
		for pos, v := range permutation(n, seed, 0) {
			counts[pos][v]++
		}
	}
	chi := 0.0
	expected := float64(draws) / n
	for i := range n {
		for j := range n {
			d := counts[i][j] - expected
			chi += d * d / expected
		}
	}
	// 16 degrees of freedom (the table has fixed margins); the 0.999
	// quantile is 39.25.
	if chi > 39.25 {
		t.Fatalf("chi-square %.1f over 16 dof: the shuffle is biased", chi)
	}
}

func TestShuffleAndSubsample(t *testing.T) {
	samples := make([]Sample, 50)
	for i := range samples {
		samples[i].ID = strconv.Itoa(i)
	}
	a, b := Shuffle(samples, 3), Shuffle(samples, 3)
	if !reflect.DeepEqual(a, b) || reflect.DeepEqual(a, samples) || samples[0].ID != "0" {
		t.Fatal("Shuffle is not a deterministic, non-trivial copy")
	}
	sub := Subsample(samples, 20, 5)
	if len(sub) != 20 || !reflect.DeepEqual(sub, Subsample(samples, 20, 5)) {
		t.Fatalf("Subsample gave %d samples or is not deterministic", len(sub))
	}
	last := -1
	for _, s := range sub {
		i, _ := strconv.Atoi(s.ID)
		if i <= last {
			t.Fatalf("Subsample broke file order: %v", sub)
		}
		last = i
	}
	if reflect.DeepEqual(sub, Subsample(samples, 20, 6)) {
		t.Error("seeds 5 and 6 subsample alike")
	}
	if len(Subsample(samples, 80, 1)) != 50 || Subsample(samples, 0, 1) != nil {
		t.Error("Subsample bounds")
	}
}

// BenchmarkSamplerEpoch deals one epoch of 100,000 samples in batches of
// 128 (a fresh permutation plus 781 batches); its denominator,
// BenchmarkStdlibPerm, is math/rand/v2's Perm of the same size, the
// permutation the sampler replaces with one stable across Go releases.
func BenchmarkSamplerEpoch(b *testing.B) {
	s, _ := NewSampler(100000, SamplerConfig{BatchSize: 128, Seed: 1, Shuffle: true, DropLast: true})
	per := s.BatchesPerEpoch()
	for b.Loop() {
		for range per {
			s.Next()
		}
	}
}

func BenchmarkStdlibPerm(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 0))
	for b.Loop() {
		r.Perm(100000)
	}
}
