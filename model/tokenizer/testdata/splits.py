"""Splits of the golden strings by the Qwen2 and Llama 3 patterns, computed
with Python's `regex` module, which like Oniguruma (the Rust tokenizers)
supports \\p{L}, lookahead and full Unicode case folding in (?i:...).
It is the oracle for the hand-written splitter on the cases transformers.js
gets wrong (long s, U+017F, folds to s). Run: python3 splits.py
"""
import gzip
import json
import regex

QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
LLAMA3 = QWEN2.replace(r"|\p{N}|", r"|\p{N}{1,3}|")
# What a ByteLevel pre-tokenizer with use_regex=true splits by (GPT-2).
GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

with gzip.open("golden/strings.jsonl.gz", "rt", encoding="utf-8") as f:
    strings = [json.loads(line) for line in f]
strings += ["'ſ", "it'ſ", "'ſt", "'ſ'ſ", "'ſome", "ſ'ſ", "'ſ's", "'Ll", "'lL", "'ﬅ", "'K", "'\u212a", "x'ſ y", "'ſ\n"]

out = []
for s in strings:
    out.append({"s": s, "qwen2": regex.findall(QWEN2, s), "llama3": regex.findall(LLAMA3, s), "gpt2": regex.findall(GPT2, s)})
with gzip.open("splits.jsonl.gz", "wt", encoding="utf-8", compresslevel=9) as f:
    for row in out:
        f.write(json.dumps(row, ensure_ascii=False) + "\n")
print(len(out), "strings; python regex", regex.__version__)
