package env

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/r1go/r1go/data"
)

// golden is testdata/qa_golden.json, written by qa_golden.py with Python's
// own str.lower, str.split and re.
type golden struct {
	Normalise []struct{ In, Out string } `json:"normalise"`
	Pairs     []struct {
		Pred    string   `json:"pred"`
		Golds   []string `json:"golds"`
		EM      float64  `json:"em"`
		CoverEM float64  `json:"cover_em"`
		F1      float64  `json:"f1"`
	} `json:"pairs"`
	Trajectories []struct {
		Name       string   `json:"name"`
		Text       string   `json:"text"`
		Golds      []string `json:"golds"`
		Format     float64  `json:"format"`
		Answer     float64  `json:"answer"`
		AgentR1    float64  `json:"agent_r1"`
		Acc        float64  `json:"acc"`
		Paper      float64  `json:"paper"`
		SearchR1EM float64  `json:"search_r1_em"`
	} `json:"trajectories"`
}

func loadGolden(t *testing.T) golden {
	t.Helper()
	b, err := os.ReadFile("testdata/qa_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Normalise) < 30 || len(g.Pairs) < 10 || len(g.Trajectories) < 10 {
		t.Fatal("golden file too small")
	}
	return g
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func TestNormalizeAgainstPython(t *testing.T) {
	for _, c := range loadGolden(t).Normalise {
		if got := NormalizeAnswer(c.In); got != c.Out {
			t.Errorf("NormalizeAnswer(%q) = %q, Python %q", c.In, got, c.Out)
		}
	}
}

func TestMetricsAgainstPython(t *testing.T) {
	for _, c := range loadGolden(t).Pairs {
		if got := ExactMatch(c.Pred, c.Golds); got != c.EM {
			t.Errorf("EM(%q, %q) = %v, Python %v", c.Pred, c.Golds, got, c.EM)
		}
		if got := CoverEM(c.Pred, c.Golds); got != c.CoverEM {
			t.Errorf("CoverEM(%q, %q) = %v, Python %v", c.Pred, c.Golds, got, c.CoverEM)
		}
		if got := F1(c.Pred, c.Golds); !near(got, c.F1) {
			t.Errorf("F1(%q, %q) = %v, Python %v", c.Pred, c.Golds, got, c.F1)
		}
	}
}

func TestRewardsAgainstPython(t *testing.T) {
	m := QwenMarkup()
	for _, c := range loadGolden(t).Trajectories {
		tr := Transcript{Text: c.Text, Blocks: m.AssistantBlocks(c.Text)}
		checks := []struct {
			name      string
			got, want float64
		}{
			{"format", FormatScore(tr.Blocks), c.Format},
			{"answer", AnswerScore(tr.Blocks, c.Golds), c.Answer},
		}
		for _, name := range []string{"agent-r1", "agent-r1-acc", "paper", "search-r1-em"} {
			fn, err := Reward(name)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]float64{"agent-r1": c.AgentR1, "agent-r1-acc": c.Acc, "paper": c.Paper, "search-r1-em": c.SearchR1EM}[name]
			checks = append(checks, struct {
				name      string
				got, want float64
			}{name, fn(tr, c.Golds), want})
		}
		for _, ch := range checks {
			if !near(ch.got, ch.want) {
				t.Errorf("%s: %s = %v, Python %v", c.Name, ch.name, ch.got, ch.want)
			}
		}
	}
}

func TestScorerMetrics(t *testing.T) {
	s, err := NewScorer("agent-r1", QwenMarkup())
	if err != nil {
		t.Fatal(err)
	}
	sample := data.Sample{Answers: []string{"Paris"}}
	text := "<|im_start|>assistant\n<think>x</think><answer>the Paris, France</answer><|im_end|>"
	got := s.Score(sample, text)
	// hand computed: strict EM 0, cover EM 1, F1 = 2*(1/2*1)/(1/2+1) = 2/3,
	// format 0.5 (no tool turn), reward -1 + 0.5 + 1 = 0.5
	if got.EM != 0 || got.CoverEM != 1 || !near(got.F1, 2.0/3) || got.Format != 0.5 || got.Score != 0.5 || got.Answer != "the Paris, France" {
		t.Fatalf("%+v", got)
	}
	blocks := s.ScoreBlocks(sample, []string{"<think>x</think><answer>the Paris, France</answer>"})
	if blocks != got {
		t.Fatalf("ScoreBlocks %+v != Score %+v", blocks, got)
	}
	if _, err := NewScorer("nope", QwenMarkup()); err == nil {
		t.Fatal("unknown reward accepted")
	}
}

func TestRegisterRewardDuplicatePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate registration did not panic")
		}
	}()
	RegisterReward("em", func(Transcript, []string) float64 { return 0 })
}

func TestProcessRewards(t *testing.T) {
	r := 0.25
	calls := []CallInfo{{Success: true, Reward: &r}, {Success: false}}
	for _, tc := range []struct {
		cfg  ProcessConfig
		want float64
	}{
		{ProcessConfig{Name: "none"}, 0},
		{ProcessConfig{Name: "tool"}, 0.25},
		{ProcessConfig{Name: "call-validity", Valid: 0.1, Invalid: -0.2}, 0.25 + 0.1 - 0.2},
	} {
		fn, err := processReward(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := fn(&ToolEnv{}, calls); !near(got, tc.want) {
			t.Errorf("%s: %v want %v", tc.cfg.Name, got, tc.want)
		}
	}
	if _, err := processReward(ProcessConfig{Name: "prime"}); err == nil {
		t.Fatal("unknown process reward accepted")
	}
}
