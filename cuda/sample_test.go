package cuda

import (
	"math"
	"testing"

	"github.com/r1go/r1go/model"
)

// TestGPUSample: greedy rows match model.SampleToken exactly (ties to the
// lowest id); temperature sampling returns the host's log-softmax of the
// chosen token and, over 60000 draws from one distribution, frequencies
// that pass a chi-square test against softmax(z/T) (5 degrees of freedom,
// critical value 37.7 at p = 1e-6, so a correct sampler fails once in a
// million runs). Truncated sampling: TestGPUSampleTruncated.
func TestGPUSample(t *testing.T) {
	e := newOpEnv(t)
	rows, V := 37, 50000
	z := e.randn(rows*V, 3)
	z[5*V+100], z[5*V+7] = 1e3, 1e3 // a tie: the lower id wins
	gz := upload(e.gpu, z)
	tok, lp := make([]int32, rows), make([]float32, rows)
	if err := e.gpu.Sample(tok, lp, gz, V, model.Greedy, e.rng.Uint64()); err != nil {
		t.Fatal(err)
	}
	var scratch []int32
	for r := 0; r < rows; r++ {
		want, _ := model.SampleToken(z[r*V:(r+1)*V], model.Greedy, nil, &scratch)
		if tok[r] != want || lp[r] != 0 {
			t.Fatalf("greedy row %d: token %d logprob %v, host %d", r, tok[r], lp[r], want)
		}
	}

	s := model.Sampling{Temperature: 0.8, TopP: 1, TopK: -1}
	if err := e.gpu.Sample(tok, lp, gz, V, s, e.rng.Uint64()); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < rows; r++ {
		row := z[r*V : (r+1)*V]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, float64(v)/s.Temperature)
		}
		var sum float64
		for _, v := range row {
			sum += math.Exp(float64(v)/s.Temperature - m)
		}
		want := float64(row[tok[r]])/s.Temperature - m - math.Log(sum)
		if math.Abs(float64(lp[r])-want) > 1e-4*math.Max(1, math.Abs(want)) {
			t.Fatalf("row %d: logprob %v of token %d, host %v", r, lp[r], tok[r], want)
		}
	}

	probs := []float64{0.05, 0.1, 0.15, 0.2, 0.2, 0.3}
	n := 60000
	logits := make([]float32, n*len(probs))
	for r := 0; r < n; r++ {
		for v, q := range probs {
			logits[r*len(probs)+v] = float32(math.Log(q) * s.Temperature) // softmax(z/T) = probs
		}
	}
	gl := upload(e.gpu, logits)
	tok, lp = make([]int32, n), make([]float32, n)
	if err := e.gpu.Sample(tok, lp, gl, len(probs), s, e.rng.Uint64()); err != nil {
		t.Fatal(err)
	}
	count := make([]float64, len(probs))
	for _, k := range tok {
		count[k]++
	}
	var chi2 float64
	for v, q := range probs {
		exp := q * float64(n)
		chi2 += (count[v] - exp) * (count[v] - exp) / exp
	}
	t.Logf("counts %v, chi-square %.2f", count, chi2)
	if chi2 > 37.7 {
		t.Errorf("sampled frequencies %v are not softmax(z/T) %v: chi-square %.1f > 37.7", count, probs, chi2)
	}
}
