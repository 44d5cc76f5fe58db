// Package synth generates the synthetic multi-hop world, r1go's embedded
// default dataset and corpus: from a seed, a world of invented entities and
// the relations between them, a corpus of short passages that state those
// facts, and 2- to 4-hop questions with gold answers and gold tool-use
// trajectories, split into train, validation and test sets that share no
// question.
//
// The central type is World, made by New from a Config. Everything in it is
// a pure function of the Config: the same seed gives the same world, byte
// for byte, on every machine.
//
// The world is built so that reinforcement learning with a search tool pays:
//
//   - Names are made of invented syllables and facts are drawn at random,
//     each candidate object dealt out equally often, so no fact can be
//     guessed from a question, nor an answer from the training answers'
//     frequencies (the best such prior gets about 1% of the test split);
//     the model has to search.
//   - Each relation is functional (a subject has exactly one object), so a
//     question has exactly one answer, and a question of k hops needs k
//     searches: the query of hop i names the entity hop i-1 found.
//   - Each passage states one fact (Config.FactsPerPassage raises that) and
//     carries its subject's name, so a BM25 search for "founder of Tazomir"
//     returns the passage "The founder of Tazomir is Belovan." first. Every
//     gold query ranks its evidence first (tested with Lucene-style
//     analysis), so a search tool that returns one to three hits is enough,
//     and fewer hits keep a tiny model's context short.
//   - The language is small and regular (twenty words besides the names:
//     the ten relation nouns and "what who is the of I need now so answer"),
//     so a tokenizer of a few hundred to two thousand tokens covers it and a
//     tiny model can learn it on a CPU.
//   - No name is a substring of another name, because the multi-hop QA
//     reward accepts an answer that contains the gold one (SubEM), and no two
//     names share a Porter stem, which BM25 analyzers index.
//
// Knobs for the warm start. Every training sample carries its gold
// trajectory (data.Sample.Gold). SFTSubset picks which of them the
// supervised warm start sees and how, so that RL has headroom left to gain:
// questions of at most SFTOptions.MaxHops hops, a Fraction of those, and
// with SFTOptions.EarlyAnswer the demonstrations of a hasty teacher (Hasty)
// that answers before each search but the first with that chance, naming the
// entity it found last. Warm-started on gold 2-hop trajectories only, a tiny
// policy answers after two searches and never tries a third, so RL had
// nothing to reinforce; warm-started on a hasty teacher's demonstrations of
// every length, it has learned the format, the queries and the copying, and
// also searches to the end of the chain often enough under sampling that
// the outcome reward can teach it to (r1go's embedded default run does this).
//
// Errors: New returns an error, naming the Config field, when the Config is
// out of range or asks for more distinct questions than the world holds; it
// never panics on a Config.
package synth
