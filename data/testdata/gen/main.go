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
}
