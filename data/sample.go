// Package data loads the datasets and corpora r1go trains and evaluates on.
//
// The central type is Sample: one question with its gold answers, whatever
// file format it came from (HotpotQA and 2WikiMultihopQA JSON, MuSiQue JSONL,
// FlashRAG JSONL, verl/Search-R1/Agent-R1 parquet, the synthetic multi-hop
// world). Loaders return errors that name the file, the line or row, and the
// field that was wrong; a malformed record is either skipped and counted or
// fatal, as the caller chooses.
package data

// Message is one chat message of a prompt as the parquet files of
// verl, Search-R1 and Agent-R1 store it.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Sample is one question with its gold answers.
type Sample struct {
	ID         string    // unique within a loaded set; "data_source:id" where sources share ids
	DataSource string    // "hotpotqa", "2wikimultihopqa", "musique", "synthetic", ...
	Question   string    // the bare question, without instructions
	Answers    []string  // gold answers; EM matches any of them
	Prompt     []Message // the chat prompt when the file carries one (parquet); nil otherwise
	Extra      map[string]string
}
