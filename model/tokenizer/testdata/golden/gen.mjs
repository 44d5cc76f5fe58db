// Golden ids for model/tokenizer, produced by @huggingface/transformers
// (its JavaScript tokenizer, an implementation independent of ours).
// Run through gen.sh. Writes, per fixture tokenizer in ../<name>/:
//   <name>.jsonl.gz  one line per string of strings.jsonl.gz:
//                    {"ids": Encode, "ordinary": EncodeOrdinary, "text": decode(ids)}
//                    ("ordinary" is left out where it equals "ids")
//   <name>_decode.jsonl.gz  {"ids": random ids, "text": decode(ids),
//                    "skip": decode(ids, skip_special_tokens=true)}
// EncodeOrdinary's reference is the same tokenizer with its special added
// tokens removed from tokenizer.json: transformers.js then treats their text
// as plain text, which is Hugging Face's split_special_tokens=True.
import { AutoTokenizer, env } from "@huggingface/transformers";
import fs from "node:fs";
import path from "node:path";
import os from "node:os";
import zlib from "node:zlib";

env.allowRemoteModels = false;
env.allowLocalModels = true;

const here = path.dirname(new URL(import.meta.url).pathname);
const fixtures = path.join(here, "..");

// mulberry32: a small seeded generator so the strings are reproducible.
function rng(seed) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = rng(20261121);
const pick = (list) => list[Math.floor(rand() * list.length)];

// Hand-picked hard cases.
const hard = [
  "", " ", "  ", "\n", "\n\n", "\r\n", " \n", "\n ", "\t\t", "a", "A", "1", "12", "123", "1234", "12345678901",
  "hello world", "Hello World!", "  leading", "trailing  ", "a  b   c    d", "x \n y", "x\n\n\ny", "x \t\n z",
  "don't", "DON'T", "I'm", "you're", "we've", "they'll", "he'd", "it's", "'s", "''s", "'S'T", "rock'n'roll", "o'clock",
  "'", "''", "'''", " 's", "x's's", "can't've", "'ll'll", "'ve", "'RE", "'Re", "'rE",
  "café", "cafe\u0301", "e\u0301\u0302", "\u0301", "\u0301a", "a\u0300\u0301\u0302", "Å", "A\u030a", "\u212b",
  "\u1100\u1161\u11a8", "가각", "ﬁ", "①②③", "²³¹", "½", "Ⅻ", "٣٤٥", "۱۲۳", "１２３", "१२३", "๑๒๓", "𝟘𝟙𝟚", "߀߁",
  "3.14159", "1,000,000", "-42", "+7", "1e10", "0x1F", "v1.2.3", "2026-11-21", "12:30:45",
  "привет мир", "Привет, Мир!", "Ελληνικά", "你好，世界！", "日本語のテキスト", "한국어 텍스트", "مرحبا بالعالم", "שלום עולם",
  "नमस्ते", "สวัสดีครับ", "ქართული", "Հայերեն", "ᚠᚢᚦ", "𐌀𐌁𐌂", "𝐀𝐁𝐂", "\ue000\uf8ff", "\u{f0000}",
  "😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷🇩🇪", "❤️", "☺︎", "#️⃣", "🧑🏿‍🚀", "a😀b", " 😀 ", "😀😀😀",
  "\u00a0", "a\u00a0b", "\u3000", "a\u3000b", "\u2028", "\u2029", "\u0085", "a\u0085b", "\u1680", "\u2003x", "\u202f",
  "\u205f", "\u180e", "\u200b", "a\u200bb", "\ufeff", "\ufeffa", "\u000b", "\u000c", "\u001c\u001d\u001e\u001f",
  "\u200d", "\u200c", "\u2060", "\u00ad", "x\u00ady", "\u0000", "a\u0000b", "\u007f", "\u0080\u009f",
  "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>", "<|im_start|>user\nhi<|im_end|>\n",
  "<|im_end|><|im_end|>", "<|im_end", "|im_end|>", "<<|im_end|>>", "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"q\"}}\n</tool_call>",
  "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>", "<|reserved_special_token_3|>",
  "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>", "<think>\nhmm\n</think>",
  "func main() {\n\tfmt.Println(\"hi\")\n}\n", "    return x\n", "if (a && b || !c) { x += 1; }", "a==b!=c<=d>=e",
  "http://example.com/path?q=1&r=2#frag", "user@example.com", "C:\\Users\\x", "$100.00", "50%", "#hashtag @mention",
  "...", "!!!", "?!", "—", "–", "«quoted»", "“smart quotes”", "‘single’", "…", "·", "¡Hola!", "¿Qué?",
  "Ünïcödé", "ÀÉÎÕÜ", "ßẞ", "ǅǈǋ", "İstanbul", "ı", "Ωmega", "µ", "ſ",
  "a".repeat(300), " ".repeat(100), "\n".repeat(50), "ab".repeat(200), "😀".repeat(40), "1".repeat(50), "中".repeat(100),
  "x" + " ".repeat(20) + "y", "\t".repeat(10) + "z", " \n \n \n", "\r\r\n\n\r",
];

// Pieces for the generated mixes.
const alphabet = {
  ascii: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".split(""),
  words: ["the", "quick", "brown", "fox", "world", "hello", "search", "query", "answer", "tool", "Paris", "x", "I", "a", "model"],
  accents: "àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿčďěňřšťžąęłńśźżőű".split("").concat(["e\u0301", "a\u0308", "o\u0303", "n\u0303"]),
  cjk: "你好世界中文字测试模型训练数据我们今天天气很好北京こんにちはカタカナ漢字한국어서울".split(""),
  cyrillic: "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЕЁЖЗ".split(""),
  digits: "0123456789".split("").concat(["٣", "۴", "１", "²", "Ⅻ", "৫", "߀", "𝟘", "½", "①", "๓", "१"]),
  punct: ".,!?;:-()[]{}\"'`~@#$%^&*_+=|\\/<>—–«»“”‘’…·¡¿、。！？".split("").concat(["...", "--", "->", "=>", "::"]),
  contractions: ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D", "'x", "'"],
  space: [" ", " ", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", "\u000b", "\u000c", "\u0085", "\u00a0", "\u1680",
    "\u2000", "\u2002", "\u2009", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", " \n", "\n ", "\t\n"],
  notspace: ["\u200b", "\u180e", "\ufeff", "\u001c", "\u001f", "\u200d", "\u2060", "\u00ad"],
  emoji: ["😀", "🎉", "👍", "👍🏿", "🚀", "❤️", "👨‍👩‍👧", "👩‍💻", "🏳️‍🌈", "🇯🇵", "✨", "🔥", "🤖", "☕", "1️⃣", "🫠"],
  combining: ["\u0300", "\u0301", "\u0302", "\u0308", "\u0327", "\u0338", "\u20dd", "\u0903", "\u093f", "\u0e31", "\u302a"],
  rare: ["𐌀", "𝐀", "𝔄", "ᚠ", "ꙮ", "ꓮ", "Ꮳ", "ⴰ", "ꕙ", "𓀀", "𒀀", "\ue000", "\u{f0001}", "ǂ", "ʼ", "ˆ", "˙", "℃", "№", "™", "∑", "√", "∞", "≠", "ℵ"],
  scripts: "αβγδεζηθλμπσωאבגדהابتثجحخदनमसकกขคงज".split(""),
  special: ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>", "<|eot_id|>",
    "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|im_end", "<|", "|>", "<tool_call"],
};
const kinds = Object.keys(alphabet);

function mix(maxParts) {
  const parts = [];
  const n = 1 + Math.floor(rand() * maxParts);
  for (let i = 0; i < n; i++) {
    const kind = pick(kinds);
    if (kind === "special" && rand() < 0.6) continue;
    parts.push(pick(alphabet[kind]));
    if (rand() < 0.3) parts.push(pick(alphabet.space));
  }
  return parts.join("");
}

const strings = [...hard];
// Single-kind runs, then mixes of growing length.
for (const kind of kinds) {
  for (let i = 0; i < 40; i++) {
    const n = 1 + Math.floor(rand() * 12);
    let s = "";
    for (let j = 0; j < n; j++) s += pick(alphabet[kind]);
    strings.push(s);
  }
}
for (let i = 0; i < 2400; i++) strings.push(mix(i < 1200 ? 8 : 40));
// A Unicode sweep: each line holds a run of code points from one block.
for (const [lo, hi] of [[0x20, 0x7e], [0xa0, 0x24f], [0x370, 0x3ff], [0x400, 0x4ff], [0x590, 0x6ff], [0x900, 0x97f],
  [0xe00, 0xe7f], [0x1100, 0x11ff], [0x2000, 0x206f], [0x2100, 0x22ff], [0x3000, 0x30ff], [0xac00, 0xac80], [0xff00, 0xffef]]) {
  for (let c = lo; c <= hi; c += 24) {
    let s = "";
    for (let k = c; k < Math.min(c + 24, hi + 1); k++) {
      if (k >= 0xd800 && k <= 0xdfff) continue;
      s += String.fromCodePoint(k);
    }
    strings.push(s);
  }
}

// Strings with long s are left out of the comparison: transformers.js folds
// case in (?i:...) for ASCII only, while Oniguruma (the Rust tokenizers)
// also folds U+017F to s, and so does our splitter. split_test covers it
// against Python's regex module.
const kept = strings.filter((s) => !s.includes("ſ"));

function gz(file, lines) {
  fs.writeFileSync(file, zlib.gzipSync(lines.map((l) => JSON.stringify(l)).join("\n") + "\n", { level: 9 }));
}

// Writes a copy of a fixture without its special added tokens.
function ordinaryCopy(name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `ordinary-${name}-`));
  const tok = JSON.parse(fs.readFileSync(path.join(fixtures, name, "tokenizer.json"), "utf8"));
  tok.added_tokens = tok.added_tokens.filter((t) => !t.special);
  fs.writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify(tok));
  const cfg = JSON.parse(fs.readFileSync(path.join(fixtures, name, "tokenizer_config.json"), "utf8"));
  for (const id of Object.keys(cfg.added_tokens_decoder)) {
    if (cfg.added_tokens_decoder[id].special) delete cfg.added_tokens_decoder[id];
  }
  for (const key of ["bos_token", "eos_token", "pad_token"]) cfg[key] = null;
  cfg.additional_special_tokens = [];
  fs.writeFileSync(path.join(dir, "tokenizer_config.json"), JSON.stringify(cfg));
  return dir;
}

gz(path.join(here, "strings.jsonl.gz"), kept);
for (const name of ["qwen2", "llama3"]) {
  const tok = await AutoTokenizer.from_pretrained(path.join(fixtures, name));
  const ord = await AutoTokenizer.from_pretrained(ordinaryCopy(name));
  const rows = kept.map((s) => {
    const ids = tok.encode(s, { add_special_tokens: false });
    const ordinary = ord.encode(s, { add_special_tokens: false });
    const row = { ids };
    if (JSON.stringify(ordinary) !== JSON.stringify(ids)) row.ordinary = ordinary;
    row.text = ids.length ? tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : "";
    return row;
  });
  gz(path.join(here, `${name}.jsonl.gz`), rows);
  // Random id sequences: tokens that end inside a character, stray
  // continuation bytes, added tokens in between.
  const file = JSON.parse(fs.readFileSync(path.join(fixtures, name, "tokenizer.json"), "utf8"));
  const vocabSize = Math.max(...Object.values(file.model.vocab), ...file.added_tokens.map((t) => t.id)) + 1;
  const decodeRows = [];
  for (let i = 0; i < 600; i++) {
    const n = 1 + Math.floor(rand() * 12);
    const ids = [];
    for (let j = 0; j < n; j++) {
      // One id in four is an added token, so skipping them is exercised.
      ids.push(rand() < 0.25 ? pick(file.added_tokens).id : Math.floor(rand() * vocabSize));
    }
    decodeRows.push({
      ids,
      text: tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }),
      skip: tok.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false }),
    });
  }
  gz(path.join(here, `${name}_decode.jsonl.gz`), decodeRows);
  console.log(`${name}: ${rows.length} strings, ${decodeRows.length} decode cases, vocab ${vocabSize}`);
}
