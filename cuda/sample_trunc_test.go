package cuda

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/r1go/r1go/model"
)

// keptSet is model.SampleToken's candidate set for a row: ids sorted by
// logit (descending, ties to the lower id), the first top_k, then the
// shortest prefix whose mass under softmax(z/T) reaches top_p.
func keptSet(z []float32, s model.Sampling) []int32 {
	ids := make([]int32, len(z))
	for i := range ids {
		ids[i] = int32(i)
	}
	slices.SortStableFunc(ids, func(a, b int32) int {
		switch {
		case z[a] > z[b]:
			return -1
		case z[a] < z[b]:
			return 1
		}
		return 0
	})
	if s.TopK > 0 && s.TopK < len(z) {
		ids = ids[:s.TopK]
	}
	lp := hostLogSoftmax(z, s.Temperature)
	var mass float64
	for j, id := range ids {
		mass += math.Exp(lp[id])
		if mass >= s.TopP {
			return ids[:j+1]
		}
	}
	return ids
}

func hostLogSoftmax(z []float32, T float64) []float64 {
	m := math.Inf(-1)
	for _, v := range z {
		m = math.Max(m, float64(v)/T)
	}
	var sum float64
	for _, v := range z {
		sum += math.Exp(float64(v)/T - m)
	}
	out := make([]float64, len(z))
	for i, v := range z {
		out[i] = float64(v)/T - m - math.Log(sum)
	}
	return out
}

// chiSquare of counts against probabilities over the cells of ids.
func chiSquare(count map[int32]float64, probs map[int32]float64, n int) float64 {
	var total float64
	for _, q := range probs {
		total += q
	}
	var chi2 float64
	for id, q := range probs {
		exp := q / total * float64(n)
		chi2 += (count[id] - exp) * (count[id] - exp) / exp
	}
	return chi2
}

// TestGPUSampleTruncated: top-k, top-p and both on the device.
//
// Every draw, on random rows with ties at the cut (V = 300, and V = 50000
// with 1024 threads a row), is a member of the host's kept set and comes
// with the host's log-softmax. Then 12000 draws from one fixed
// distribution (8 ids in shuffled order, top_k 7 and top_p 0.9 keep 6)
// pass a chi-square test against the host sampler's distribution (5
// degrees of freedom, critical value 37.7 at p = 1e-6), model.SampleToken
// passes the same test on the same number of draws, and the device's
// counts fail it against the distribution a sampler that applied the
// temperature twice would give (about 140 expected at this n): the test
// has the power to see that bug.
func TestGPUSampleTruncated(t *testing.T) {
	e := newOpEnv(t)
	for _, sh := range []struct{ rows, V int }{{40, 300}, {3, 50000}} {
		rows, V := sh.rows, sh.V
		z := e.randn(rows*V, 2)
		for r := 0; r < rows; r++ { // ties, so the cut falls between equal logits
			for j := 1; j < 6; j++ {
				z[r*V+(j*37)%V] = z[r*V]
			}
		}
		gz := upload(e.gpu, z)
		for _, s := range []model.Sampling{
			{Temperature: 1, TopP: 1, TopK: 3},
			{Temperature: 0.7, TopP: 0.5, TopK: -1},
			{Temperature: 1.3, TopP: 0.8, TopK: 20},
			{Temperature: 1, TopP: 0.05, TopK: 0}, // usually one token
		} {
			tok, lp := make([]int32, rows), make([]float32, rows)
			if err := e.gpu.Sample(tok, lp, gz, V, s, e.rng.Uint64()); err != nil {
				t.Fatal(err)
			}
			for r := 0; r < rows; r++ {
				row := z[r*V : (r+1)*V]
				kept := keptSet(row, s)
				if !slices.Contains(kept, tok[r]) {
					t.Fatalf("V %d %+v row %d: token %d (logit %v) is outside the host's kept set of %d (last logit %v)",
						V, s, r, tok[r], row[tok[r]], len(kept), row[kept[len(kept)-1]])
				}
				want := hostLogSoftmax(row, s.Temperature)[tok[r]]
				if math.Abs(float64(lp[r])-want) > 1e-4*math.Max(1, math.Abs(want)) {
					t.Fatalf("V %d %+v row %d: logprob %v, host %v", V, s, r, lp[r], want)
				}
			}
		}
	}

	probs := []float64{0.3, 0.2, 0.15, 0.12, 0.1, 0.06, 0.04, 0.03}
	perm := []int{5, 2, 7, 0, 3, 6, 1, 4} // id of the k-th probability
	s := model.Sampling{Temperature: 0.8, TopP: 0.9, TopK: 7}
	V, n := len(probs), 12000
	row := make([]float32, V)
	for k, q := range probs {
		row[perm[k]] = float32(math.Log(q) * s.Temperature) // softmax(z/T) = probs
	}
	kept := keptSet(row, s)
	if len(kept) != 6 {
		t.Fatalf("the fixed distribution keeps %d ids, the test is built for 6", len(kept))
	}
	want, twice := map[int32]float64{}, map[int32]float64{}
	for k, q := range probs {
		if id := int32(perm[k]); slices.Contains(kept, id) {
			want[id] = q
			twice[id] = math.Pow(q, 1/s.Temperature) // softmax(z/T²)
		}
	}
	logits := make([]float32, 0, n*V)
	for r := 0; r < n; r++ {
		logits = append(logits, row...)
	}
	tok, lp := make([]int32, n), make([]float32, n)
	if err := e.gpu.Sample(tok, lp, upload(e.gpu, logits), V, s, e.rng.Uint64()); err != nil {
		t.Fatal(err)
	}
	count := map[int32]float64{}
	for _, k := range tok {
		count[k]++
	}
	for id := range count {
		if _, ok := want[id]; !ok {
			t.Fatalf("token %d drawn %v times lies outside the kept set %v", id, count[id], kept)
		}
	}
	hostCount := map[int32]float64{}
	rng := rand.New(rand.NewPCG(e.rng.Uint64(), 1))
	var scratch []int32
	for r := 0; r < n; r++ {
		id, _ := model.SampleToken(row, s, rng, &scratch)
		hostCount[id]++
	}
	chi, chiHost, chiTwice := chiSquare(count, want, n), chiSquare(hostCount, want, n), chiSquare(count, twice, n)
	t.Logf("device counts %v, host %v; chi-square device %.1f, host %.1f, device vs temperature-twice %.1f", count, hostCount, chi, chiHost, chiTwice)
	if chi > 37.7 {
		t.Errorf("device frequencies are not the host sampler's distribution: chi-square %.1f > 37.7", chi)
	}
	if chiHost > 37.7 {
		t.Errorf("the host sampler fails its own distribution: chi-square %.1f > 37.7 (the expected cells are wrong)", chiHost)
	}
	if chiTwice <= 37.7 {
		t.Errorf("the counts also fit a sampler applying the temperature twice (chi-square %.1f): the test has no power", chiTwice)
	}
}
