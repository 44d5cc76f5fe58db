// Package tokenizer implements the byte-level BPE tokenizers of Hugging Face
// tokenizer.json files (Qwen2/Qwen2.5, Llama 3 and the like) and their chat
// templates, in pure Go.
//
// The central type is Tokenizer: Load reads a model folder, Encode and
// EncodeOrdinary turn text into ids, Decode and DecodeText turn ids back
// into text, NewStreamDecoder decodes ids as a rollout samples them, and
// Render applies the folder's Jinja chat template. Train builds a small
// tokenizer from a corpus and Save writes it as a model folder. A
// Tokenizer is immutable once built and safe for concurrent use.
//
// # Encoding
//
// Encoding follows the Hugging Face pipeline: added tokens are matched
// first (leftmost-longest, honouring lstrip, rstrip, single_word and
// normalized), each stretch of text between them is normalized (NFC for
// Qwen2.5, via golang.org/x/text), split by the pre-tokenizer, mapped to
// the GPT-2 byte alphabet and merged by BPE rank. The Qwen2 and Llama 3
// Split patterns run on a hand-written splitter (their \s+(?!\S) lookahead
// is beyond Go's regexp); any other pattern runs on regexp2 behind the same
// interface. The splitter follows Oniguruma, which the Rust tokenizers use:
// Unicode White_Space for \s and Unicode case folding in (?i:...), so "'ſ"
// is a contraction there (transformers.js folds ASCII only and differs on
// that one letter). Character classes come from Go's unicode package
// (Unicode 15.0): a character assigned in a later Unicode version can
// class differently than in a library with newer tables. Each encoding
// goroutine keeps a private cache of
// pieces, so EncodeBatch scales over cores without a shared lock.
//
// The tests hold golden ids, decodes and splits for 3,300+ strings on two
// tokenizers trained by this package (Qwen2-style and Llama-3-style), made
// by two independent implementations: @huggingface/transformers
// (JavaScript) and the Rust Hugging Face tokenizers library through its
// Node.js binding; Python's regex module is a third oracle for the split
// patterns (testdata/golden, testdata/splits.py).
//
// Encode never adds BOS or EOS: tokenizer.json's post_processor is ignored,
// because chat templates write those tokens themselves and
// apply_chat_template encodes with add_special_tokens=False. Truncation and
// padding in a re-saved file are ignored too.
//
// Ids: VocabSize is one past the largest id (vocabulary plus added tokens),
// 151,665 for Qwen2.5, less than its 151,936 embedding rows.
//
// # Decoding
//
// Decode returns the exact bytes, so Decode(Encode(s)) == s for any s in
// the normalizer's form, even invalid UTF-8 (its bytes become byte tokens).
// DecodeText replaces ill-formed sequences with U+FFFD per maximal subpart,
// which is what Python's tokenizer.decode returns; StripSpecial first gives
// its skip_special_tokens=True. clean_up_tokenization_spaces is never
// applied. A StreamDecoder holds back an incomplete character, so
// every chunk it returns is valid UTF-8 and the chunks joined equal
// DecodeText of all ids.
//
// # Chat templates
//
// Render runs the folder's template (chat_template.jinja, else
// tokenizer_config.json's chat_template; a built-in Qwen2.5 template when
// there is none) on gonja, configured as transformers configures Jinja:
// trim_blocks, lstrip_blocks, loop controls, raise_exception, strftime_now,
// and a tojson that is Python's json.dumps(ensure_ascii=False): key order
// kept, ", " and ": " separators, no HTML escaping. JSON objects (tool
// schemas, tool-call arguments) are kept as ordered dicts, and their
// keys/values/items methods and the dictsort filter work on them, as on a
// Python dict; lists index from the end as in Python (gonja's own miss
// x[-1] on a one-element list); the string methods strip, lstrip, rstrip,
// split, rsplit and replace follow Python's signatures. testdata/chat holds the
// Python jinja2 renders this is checked against, including a template of
// constructs found in real chat templates. Known gaps of the gonja engine:
// a conditional expression inside parentheses, "(a if c else b)", does not
// parse (Render returns the error; "set x = a if c else b" works), None
// prints as "" where Python prints "None", a variable holding None (tools
// when none are given) is not "defined" (in Python it is; templates test
// "tools is not none" or "if tools", which agree), and 2 ** 3 prints 8.0.
//
// A message reaches the template as the dict transformers would pass:
// role and content, an assistant's reasoning_content when it has one
// (Qwen3 renders it inside <think></think>), tool_calls, name and
// tool_call_id. Keyword arguments such as Qwen3's enable_thinking come
// from SetTemplateKwargs for every render and from a Chat's Vars for one;
// testdata/qwen3/thinking holds @huggingface/transformers' renders of 40
// chats with a Qwen3 thinking template that both are checked against.
//
// A rollout builds a conversation turn by turn; training must see exactly
// the tokens the model saw, and re-rendering the finished conversation with
// the template does not give them. The differences:
//
//   - The default system block. With no system message the Qwen2.5 template
//     still writes "<|im_start|>system\nYou are Qwen, created by Alibaba
//     Cloud. You are a helpful assistant.<|im_end|>\n" (and the tool list
//     goes into that block). A rollout's prompt must be rendered by the
//     template, so it contains that block too.
//   - The newline after <|im_end|>. The model stops at <|im_end|>; the
//     template writes "<|im_end|>\n". The "\n" belongs to the next forced
//     segment (action mask 0), not to the model's turn.
//   - Tool calls are re-serialized. The template writes each call as
//     {"name": ..., "arguments": tojson(arguments)} with Python spacing and
//     the parsed key order; the model wrote whatever bytes it sampled
//     (other spacing, another key order, text between calls). String
//     arguments are double-encoded by tojson.
//   - Assistant content around tool calls. The template writes
//     "<|im_start|>assistant\n" + content + "\n<tool_call>..."; the
//     model's own text may end in different whitespace before the tag.
//   - Consecutive tool results become one user turn with one
//     <tool_response> block each; a rollout that appends results one at a
//     time must fold them the same way.
//   - Token seams. Encoding a whole rendered text can merge across a point
//     where a rollout concatenated separately encoded pieces: "\n" that ends
//     the generation prompt followed by a sampled "\n" is one token ("\n\n")
//     when encoded together. Added tokens such as <|im_start|> never merge,
//     so seams next to them are safe.
//
// So a rollout keeps the sampled ids as they are, encodes each forced
// segment once and appends it, and never decodes and re-encodes model
// output.
//
// # Errors
//
// Loading reports malformed or unsupported files with the file and the
// field ("tokenizer: dir/tokenizer.json: model.merges[12]: token "x" is not
// in model.vocab"); unsupported components (another model type, a
// normalizer or pre-tokenizer that is not implemented, BPE dropout, byte
// fallback) are errors, never silently skipped. Template errors, including
// raise_exception, name the template's source. Encode and Decode cannot
// fail: every byte has a token, and unknown ids are skipped on decode as
// Hugging Face does.
//
// # Backends
//
// Built with the tag hftokenizers, NewHF loads the same folder through
// github.com/daulet/tokenizers (the Rust library over cgo; the user builds
// libtokenizers.a). Both it and Tokenizer satisfy Codec, and the golden
// tests run on every Codec the build has. Without the tag nothing of it is
// compiled, so the default build stays pure Go.
package tokenizer
