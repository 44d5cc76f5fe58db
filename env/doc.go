// Package env implements the environments r1go's agents act in: tools, the
// tool-calling episode, the multi-hop QA rewards, and retrieval.
//
// The central type is ToolEnv, one episode. An Env (from New) holds what
// episodes share: the Config, a validated Toolset and a Scorer; NewEpisode
// gives each trajectory its own ToolEnv, so episodes run concurrently.
//
//	ep := e.NewEpisode()
//	msgs, tools := ep.Reset(sample)      // chat messages, OpenAI tool schemas
//	for !done {
//	    r := ep.Step(ctx, modelTurn)      // observation text, process reward, done, info
//	    ...
//	}
//	scores := ep.Score(fullText)          // outcome reward, EM, F1, cover EM, format
//
// Tool calls use the Hermes/Qwen format, <tool_call>{"name": ...,
// "arguments": {...}}</tool_call>. By default the env behaves as Agent-R1's
// NousToolEnv: the first call of a turn runs, results are wrapped in
// <tool_response> inside a user turn, responses are cut to N characters, the
// next assistant turn is pre-filled with "<think>\n", and a turn without a
// call ends the episode. VerlConfig gives verl's variant (role "tool",
// parallel calls, middle truncation, no pre-fill).
//
// StyleSearchR1 is Search-R1's protocol instead: <search> query </search>
// and <answer> tags in plain text, passages returned inside the same turn
// as <information>, stop strings </search> and </answer>, EM of the last
// answer. SearchR1Env and SearchR1Episode run it with the same
// Reset/Step/Score/Done shape as Env and ToolEnv; CheckPromptStyle refuses
// a dataset whose prompts ask for the other protocol.
//
// Retrieval: Index is a BM25 inverted index over a wiki-18 or KILT corpus,
// built once into a checksummed file (BuildIndex, OpenOrBuildIndex);
// SearchR1Client and AgentR1Client call remote retrievers; NewServer serves
// any Retriever with the Search-R1 and Agent-R1 HTTP APIs; Batcher merges
// the concurrent calls of many episodes into one batched request; SearchTool
// exposes a Retriever to the model (Agent-R1, Search-R1 or verl output).
//
// Rewards: NormalizeAnswer, ExactMatch, F1 and CoverEM reproduce the
// SQuAD/HotpotQA evaluator as Python computes it (Unicode word boundaries,
// str.lower, str.split). Outcome rewards are registered by name
// ("agent-r1", "paper", "em", "f1", "cover-em", "agent-r1-acc",
// "search-r1-em"); process rewards per tool call by ProcessConfig.Name.
//
// Faults: every call's outcome is classified (ClassifyCall: ok, invalid,
// timeout, http, parse, connection, other, with the retriever URL) and
// counted in Env.ToolStats, which the trainer takes once per step as
// tool/calls, tool/invalid, tool/errors and tool/errors/<kind>.
// Config.RetrieverTimeout and RetrieverRetries (env.retriever_timeout,
// env.retriever_retries) bound what a hanging retriever costs a call.
// Before any work, commands probe a remote retriever (Prober: one query to
// Search-R1's /retrieve, Agent-R1's GET /health) with WaitReady, which
// fails with a ProbeError naming the URL and what came back, or, under
// Config.RetrieverWait (env.retriever_wait), waits with back-off for a
// retriever that is starting.
//
// Error policy: bad model output is never an error. Broken tool-call JSON,
// a missing name or arguments, an unknown tool, arguments that fail the
// schema, a tool that returns an error, times out or panics: each becomes
// an "Error: ..." observation with success false and an ErrorKind in the
// step info. Bad configuration, tool schemas, corpus and index files, and
// failed retriever requests are errors that name the file, line, field or
// URL (IndexError, ClientError, ProbeError, data.CorpusError). Error strings start
// with "env:".
package env
