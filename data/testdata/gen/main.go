// Command gen writes the parquet fixtures of package data's tests with
// data.WriteParquet, the writer r1go also exports datasets with.
// pyarrow is not packaged for Debian 12 (apt-cache policy python3-pyarrow
// finds nothing), so the files come from parquet-go, and three checks that
// do not trust it look at them: TestParquetPhysicalSchema compares the
// footers with the pyarrow layout of formats.md §3.7 written out by hand,
// check_parquet_footer.py decodes the footers with its own Thrift reader,
// and hyparquet (JavaScript) reads every cell back.
//
// Regenerate everything, from the repository root:
//
//	go run ./data/testdata/gen
//	python3 data/testdata/check_parquet_footer.py
//	(cd data/testdata/hyparquet && npm install --no-save hyparquet@1.20.0 && node dump.mjs)
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/parquet-go/parquet-go"

	"github.com/r1go/r1go/data"
)

// searchR1Rows imitate Search-R1's train.parquet: two sources whose ids
// repeat, the base prompt, ground_truth {target: [...]}.
var searchR1Rows = []data.Sample{
	{ID: "nq:train_0", DataSource: "nq", Question: "total number of death row inmates in the us", Answers: []string{"2,718"}},
	{ID: "nq:train_1", DataSource: "nq", Question: "big little lies season 2 how many episodes", Answers: []string{"seven", "7"}},
	{ID: "hotpotqa:train_0", DataSource: "hotpotqa", Question: "Which magazine was started first Arthur's Magazine or First for Women?", Answers: []string{"Arthur's Magazine"}},
	// A hand-made chat prompt with a system message: the loader takes the
	// question from the question column, not from the prompt.
	{ID: "hotpotqa:train_1", DataSource: "hotpotqa", Question: "The Oberoi family is part of a hotel company that has a head office in what city?", Answers: []string{"Delhi"},
		Prompt: []data.Message{{Role: "system", Content: "You are a helpful assistant."}, {Role: "user", Content: "Question: The Oberoi family is part of a hotel company that has a head office in what city?\n"}}},
}

// agentR1Rows imitate Agent-R1's legacy HotpotQA preprocessing: Hugging
// Face repo as data_source, ground_truth a plain string, leftover columns.
var agentR1Rows = []data.Sample{
	{ID: "hotpotqa/hotpot_qa:5a7a06935542990198eaf050", DataSource: "hotpotqa/hotpot_qa", Question: "Which magazine was started first Arthur's Magazine or First for Women?", Answers: []string{"Arthur's Magazine"},
		Extra: map[string]string{"type": "comparison", "level": "medium", "supporting_facts": `{"title": ["Arthur's Magazine", "First for Women"], "sent_id": [0, 0]}`}},
	{ID: "hotpotqa/hotpot_qa:5a879ab05542996e4f30887e", DataSource: "hotpotqa/hotpot_qa", Question: "The Oberoi family is part of a hotel company that has a head office in what city?", Answers: []string{"Delhi"},
		Extra: map[string]string{"type": "bridge", "level": "hard", "supporting_facts": `{"title": ["Oberoi family", "The Oberoi Group"], "sent_id": [0, 0]}`}},
}

// badRows hold one good row, one with an unknown data_source and one with
// no gold answer.
var badRows = []data.Sample{
	{ID: "nq:ok", DataSource: "nq", Question: "who wrote the song photograph by ringo starr", Answers: []string{"Ringo Starr", "George Harrison"}},
	{ID: "gsm8k:1", DataSource: "gsm8k", Question: "What is 2 + 3?", Answers: []string{"5"}},
	{ID: "nq:noanswer", DataSource: "nq", Question: "a question without a gold answer"},
}

func write(dir, name string, rows []data.Sample, layout data.ParquetLayout) {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := data.WriteParquet(f, rows, layout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func main() {
	dir := filepath.Join("data", "testdata")
	write(dir, "searchr1_element.parquet", searchR1Rows, data.ParquetLayout{Style: data.StyleSearchR1})
	write(dir, "searchr1_item.parquet", searchR1Rows, data.ParquetLayout{Style: data.StyleSearchR1, ListItem: true})
	write(dir, "agentr1_element.parquet", agentR1Rows, data.ParquetLayout{Style: data.StyleAgentR1})
	write(dir, "agentr1_item.parquet", agentR1Rows, data.ParquetLayout{Style: data.StyleAgentR1, ListItem: true})
	write(dir, "searchr1_badrows.parquet", badRows, data.ParquetLayout{Style: data.StyleSearchR1, Split: "test"})
	writeStrictFixtures(dir)
}

// The strict-schema fixtures: files as a user's own
// preprocessing gets them wrong, and the parquet corpora of KILT and DPR.

type groundTruth struct {
	Target []string `parquet:"target,list"`
}

type rewardModel struct {
	Style       string       `parquet:"style"`
	GroundTruth *groundTruth `parquet:"ground_truth,optional"`
}

// promptStringRow: a prompt saved as JSON text instead of a list of
// messages (pandas' to_parquet of a column of json.dumps strings).
type promptStringRow struct {
	DataSource  string      `parquet:"data_source"`
	Prompt      string      `parquet:"prompt"`
	RewardModel rewardModel `parquet:"reward_model"`
}

// nullTruthRow: a Search-R1 row whose ground_truth is null in row 2, with
// FlashRAG's golden_answers kept beside it.
type message struct {
	Role    string `parquet:"role"`
	Content string `parquet:"content"`
}

type nullTruthRow struct {
	ID            string      `parquet:"id"`
	DataSource    string      `parquet:"data_source"`
	Prompt        []message   `parquet:"prompt,list"`
	GoldenAnswers []string    `parquet:"golden_answers,list"`
	RewardModel   rewardModel `parquet:"reward_model"`
}

// noRewardRow: a Search-R1 row whose preprocessing dropped reward_model,
// keeping FlashRAG's columns: no row of such a file has a gold answer.
type noRewardRow struct {
	ID            string    `parquet:"id"`
	DataSource    string    `parquet:"data_source"`
	Question      string    `parquet:"question"`
	GoldenAnswers []string  `parquet:"golden_answers,list"`
	Prompt        []message `parquet:"prompt,list"`
}

// kiltRow is corag/kilt-corpus: one passage per row.
type kiltRow struct {
	ID          string `parquet:"id"`
	Title       string `parquet:"title"`
	Contents    string `parquet:"contents"`
	WikipediaID string `parquet:"wikipedia_id"`
}

// dprRow is DPR's psgs_w100 as a parquet file: the body alone in text.
type dprRow struct {
	ID    int64  `parquet:"id"`
	Title string `parquet:"title"`
	Text  string `parquet:"text"`
}

func writeRows[T any](dir, name string, rows []T) {
	f, err := os.Create(filepath.Join(dir, name))
	if err == nil {
		err = parquet.Write(f, rows)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func writeStrictFixtures(dir string) {
	// In a folder of their own: the footer and hyparquet checks cover the
	// files of data.WriteParquet in testdata/.
	dir = filepath.Join(dir, "strict")
	q := "who wrote the song photograph by ringo starr?"
	writeRows(dir, "strict_prompt_string.parquet", []promptStringRow{
		{"nq", `[{"role": "user", "content": "` + data.SearchR1Prompt(q)[:40] + ` Question: ` + q + `\n"}]`, rewardModel{"rule", &groundTruth{[]string{"Ringo Starr"}}}},
		{"nq", `[{"role": "user", "content": "Question: who founded Roche?\n"}]`, rewardModel{"rule", &groundTruth{[]string{"Fritz Hoffmann-La Roche"}}}},
	})
	user := func(q string) []message { return []message{{"user", data.SearchR1Prompt(q)}} }
	writeRows(dir, "strict_null_truth.parquet", []nullTruthRow{
		{"test_0", "nq", user("who founded roche?"), []string{"Fritz Hoffmann-La Roche"}, rewardModel{"rule", &groundTruth{[]string{"Fritz Hoffmann-La Roche"}}}},
		{"test_1", "nq", user("where is lake vostok?"), []string{"Antarctica"}, rewardModel{"rule", nil}},
		{"test_2", "nq", user("who was evan morris?"), []string{"a lobbyist"}, rewardModel{"rule", &groundTruth{[]string{"a lobbyist"}}}},
	})
	var noReward []noRewardRow
	for i := range 10 {
		q := fmt.Sprintf("who held office number %d?", i+1)
		noReward = append(noReward, noRewardRow{fmt.Sprintf("test_%d", i), "nq", q, []string{fmt.Sprintf("holder %d", i+1)}, user(q)})
	}
	writeRows(dir, "strict_no_reward_model.parquet", noReward)
	writeRows(dir, "corpus_kilt.parquet", []kiltRow{
		{"1000", "Evan Morris", "Evan Morris\nEvan L. Morris (January 26, 1977 – July 9, 2015) was a lobbyist for Genentech.", "5000"},
		{"1001", "Lake Vostok", "Lake Vostok\nLake Vostok is the largest of Antarctica's subglacial lakes.", "5001"},
	})
	writeRows(dir, "corpus_dpr.parquet", []dprRow{
		{1, "Aaron", "Aaron is a prophet, high priest, and the brother of Moses."},
		{2, "Lake Vostok", "Lake Vostok lies under the Russian Vostok Station."},
	})
}
