// A second, independent reference: the Hugging Face tokenizers library
// itself (Rust, the implementation Python transformers uses), through its
// official Node.js binding, npm package "tokenizers". Run through gen.sh.
// Writes:
//   rust_<name>.jsonl.gz  per string of ../splits.jsonl.gz (the golden
//                         strings plus long-s cases): {"ids": Encode,
//                         "ordinary": EncodeOrdinary (when different),
//                         "text": decode(ids)}
//   rust_<name>_decode.jsonl.gz  the ids of <name>_decode.jsonl.gz decoded:
//                         {"ids", "text", "skip": skip_special_tokens}
//   rust_splits.jsonl.gz  per string: the pieces of the Qwen2, Llama 3 and
//                         GPT-2 patterns as the Rust Split pre-tokenizer
//                         (Oniguruma) cuts them, read off the word ids of a
//                         merge-free byte-level BPE.
import { Tokenizer } from "tokenizers";
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";

const here = path.dirname(new URL(import.meta.url).pathname);
const fixtures = path.join(here, "..");
const readGz = (file) => zlib.gunzipSync(fs.readFileSync(file)).toString("utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l));
const gz = (file, rows) => fs.writeFileSync(file, zlib.gzipSync(rows.map((r) => JSON.stringify(r)).join("\n") + "\n", { level: 9 }));

const strings = readGz(path.join(fixtures, "splits.jsonl.gz")).map((r) => r.s);

for (const name of ["qwen2", "llama3"]) {
  const json = JSON.parse(fs.readFileSync(path.join(fixtures, name, "tokenizer.json"), "utf8"));
  const tok = Tokenizer.fromString(JSON.stringify(json));
  // EncodeOrdinary's reference: the file without its special added tokens
  // (the binding has no split_special_tokens switch). The Rust loader then
  // numbers the remaining added tokens from the vocabulary size on, so
  // their ids are mapped back to the file's.
  const kept = json.added_tokens.filter((t) => !t.special);
  json.added_tokens = kept;
  const ord = Tokenizer.fromString(JSON.stringify(json));
  const back = new Map();
  for (const t of kept) {
    const [id] = (await ord.encode(t.content, null, { addSpecialTokens: false })).getIds();
    back.set(id, t.id);
  }
  const rows = [];
  for (const s of strings) {
    const ids = (await tok.encode(s, null, { addSpecialTokens: false })).getIds();
    const ordinary = (await ord.encode(s, null, { addSpecialTokens: false })).getIds().map((id) => back.get(id) ?? id);
    const row = { ids };
    if (JSON.stringify(ordinary) !== JSON.stringify(ids)) row.ordinary = ordinary;
    row.text = await tok.decode(ids, false);
    rows.push(row);
  }
  gz(path.join(here, `rust_${name}.jsonl.gz`), rows);
  // The random id sequences of the transformers.js decode file, decoded by
  // Rust with and without skip_special_tokens.
  const decodeRows = [];
  for (const { ids } of readGz(path.join(here, `${name}_decode.jsonl.gz`))) {
    decodeRows.push({ ids, text: await tok.decode(ids, false), skip: await tok.decode(ids, true) });
  }
  gz(path.join(here, `rust_${name}_decode.jsonl.gz`), decodeRows);
  console.log(`rust ${name}: ${rows.length} strings`);
}

// Splits: a tokenizer whose vocabulary is the 256 byte tokens and which has
// no merges, so every byte is a token and word ids mark the pieces.
const patterns = {
  qwen2: String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
  llama3: String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
  gpt2: String.raw`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`,
};
const qwen = JSON.parse(fs.readFileSync(path.join(fixtures, "qwen2", "tokenizer.json"), "utf8"));
const byteVocab = Object.fromEntries(Object.entries(qwen.model.vocab).filter(([, id]) => id < 256));
const splitters = {};
for (const [name, regex] of Object.entries(patterns)) {
  splitters[name] = Tokenizer.fromString(JSON.stringify({
    version: "1.0", truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: { type: "Sequence", pretokenizers: [
      { type: "Split", pattern: { Regex: regex }, behavior: "Isolated", invert: false },
      { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false }] },
    post_processor: null, decoder: { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "",
      fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab: byteVocab, merges: [] },
  }));
}
const splitRows = [];
for (const s of strings) {
  const row = { s };
  for (const [name, tok] of Object.entries(splitters)) {
    const enc = await tok.encode(s, null, { addSpecialTokens: false });
    const ids = enc.getIds();
    const words = enc.getWordIds();
    const pieces = [];
    let cur = [];
    for (let i = 0; i < ids.length; i++) {
      if (i > 0 && words[i] !== words[i - 1]) {
        pieces.push(await tok.decode(cur, false));
        cur = [];
      }
      cur.push(ids[i]);
    }
    if (cur.length) pieces.push(await tok.decode(cur, false));
    row[name] = pieces;
  }
  splitRows.push(row);
}
gz(path.join(here, "rust_splits.jsonl.gz"), splitRows);
console.log(`rust splits: ${splitRows.length} strings`);
