// Package data loads the datasets r1go trains and evaluates on, and
// samples batches from them.
//
// The central type is Sample: one question with its gold answers, whatever
// file it came from. Load and Stream read
//
//   - HotpotQA (one JSON array: _id, question, answer, supporting_facts,
//     context, type, level),
//   - 2WikiMultihopQA (the same array layout plus evidences, entity_ids),
//   - MuSiQue (JSONL: id, question, answer, answer_aliases, answerable,
//     question_decomposition, paragraphs),
//   - FlashRAG's unified JSONL (id, question, golden_answers, metadata),
//   - the parquet files of verl, Search-R1 and Agent-R1 (data_source, prompt
//     as a list of chat messages, reward_model.ground_truth as a string, a
//     list or {target: [...]}), with either LIST element name,
//
// streaming each file record by record, so a 500 MB HotpotQA array or a
// 170k-row parquet file never sits in memory whole. Formats are told by
// content, never by name: parquet by its PAR1 magic (a ".parquet" without
// it is refused as not a parquet file), gzip by its magic, then JSON.
//
// The parquet schema is read strictly: prompt must be a list of {role,
// content} messages (a string is an error, unless LoadOptions.PromptJSON,
// data.prompt_json, asks to parse it as JSON), and every row needs
// reward_model.ground_truth; another answer column stands in only when
// LoadOptions.AnswerColumn (data.answer_column) names it. FlashRAG files
// take their data_source from LoadOptions.DataSource or DataSources
// (data.data_source), else from their folder or file name
// (SourceFromPath). Corpora (CorpusReader) are wiki-18 or KILT JSONL, the
// KILT knowledge source, or parquet; KILT's wikipedia_id is kept. Sample ids are namespaced
// "data_source:id", because ids repeat across sources. The context
// paragraphs of HotpotQA and 2Wiki and the paragraphs of MuSiQue are not
// kept: retrieval reads a corpus (Passage, CorpusReader).
//
// A Sample may carry a gold tool-use Trajectory (search steps, then the
// answer); the synthetic world gives one with every question, and the SFT
// warm start renders it with Trajectory.Turns in the Hermes/Qwen
// tool-call format.
//
// Sampler draws batches in a deterministic order by seed and reports its
// position as a SamplerState, so a resumed run sees exactly the batches
// the interrupted one would have. Shuffle and Subsample are the one-shot
// forms. WriteParquet writes samples in the Search-R1 or Agent-R1 parquet
// layout, which exports the synthetic world (package data/synth) to Python
// trainers and makes the parquet test fixtures.
//
// Errors. Every problem with input names the file, the line (JSON, JSONL)
// or row (parquet), and the field: *LoadError. A record that is malformed,
// lacks a required field or names an unknown data_source is either fatal
// (the default) or, with LoadOptions.SkipMalformed, skipped and listed in
// Report.Skipped, so nothing is dropped silently; ParseOnBadRecord reads
// data.on_bad_record, SkippedCount and SkipSummary give the count to log
// and the line to print. Skip mode is for a few bad records among good
// ones: Load and LoadFiles refuse a file that would give no sample, or
// lose more than LoadOptions.MaxSkipFraction of its records
// (data.max_skip_fraction, 0.1 by default), with ErrTooManySkipped naming
// the file, the count and the first bad record's reason. Files that yield
// no sample at all are an error (ErrNoSamples), as is a corpus without a
// passage (at index build). Structural damage that
// cannot be resynchronised (a JSON array with a broken separator, a
// truncated parquet footer) always stops the read with an error; the
// samples before it have been delivered. Bad input never panics.
package data
