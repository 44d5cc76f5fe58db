#!/usr/bin/env python3
"""A byte-level BPE trained by Hugging Face tokenizers (the Rust library,
through its Python binding) in Qwen2's layout, and its golden ids for the
project's hard-string corpus, for r1go's tokenizer to match.

The tokenizer: NFC normalizer; pre-tokenizer Sequence[Split(Qwen2's regex,
Isolated), ByteLevel(add_prefix_space=False, use_regex=False)]; BPE with no
unknown token and the full 256-byte alphabet; ByteLevel decoder and post
processor; Qwen2.5's 22 added tokens (13 special, <tool_call> and the FIM
tokens not). It is trained on the repository's own text (*.md and *.go
files, in sorted path order) plus every other string of the corpus, so the
merges are natural-language-like and also cover the corpus's oddities.

Writes, under --out (default model/tokenizer/testdata/hf):
  qwen2_bpe/tokenizer.json, qwen2_bpe/tokenizer_config.json
  qwen2_bpe.golden.jsonl.gz   one line per corpus string, in corpus order:
      {"ids": encode(s).ids, "ordinary": the same with special tokens
       encoded as text (left out when equal), "text": decode(ids),
       "skip": decode(ids, skip_special_tokens=True)}
The corpus is model/tokenizer/testdata/golden/strings.jsonl.gz (one JSON
string per line; the strings r1go is checked with against
@huggingface/transformers). The Go side is benchmarks/gpu/tokparity_test.go.

Usage, from the repository root (tokenizers is on the GPU machine):
    python3 benchmarks/gpu/tokenizer_parity.py [--vocab 6000]
"""
import argparse
import glob
import gzip
import json
import os
import sys

try:
    import tokenizers
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
except ImportError:
    sys.exit("tokenizer_parity: the Python package 'tokenizers' is not installed in %s; run this on the GPU "
             "machine (tokenizers 0.23 there), see benchmarks/gpu/README.md" % sys.executable)

# transformers' tokenization_qwen2.py PRETOKENIZE_REGEX (formats.md §2.1).
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
           "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
           "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
NON_SPECIAL = ["<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
               "<|repo_name|>", "<|file_sep|>"]
NAME = "qwen2_bpe"


def byte_level(cls, **kw):
    """ByteLevel components across binding versions: older ones take fewer
    keyword arguments."""
    try:
        return cls(**kw)
    except TypeError:
        return cls(trim_offsets=False) if "trim_offsets" in kw else cls()


def build(vocab, corpus_for_training):
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = byte_level(processors.ByteLevel, add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab, min_frequency=2, show_progress=False, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus_for_training, trainer=trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIAL])
    tok.add_tokens([AddedToken(s, special=False, normalized=False) for s in NON_SPECIAL])
    return tok


def repo_text(root):
    paths = sorted(glob.glob(os.path.join(root, "**", "*.md"), recursive=True) +
                   glob.glob(os.path.join(root, "**", "*.go"), recursive=True))
    for p in paths:
        if "node_modules" in p or "/." in p[len(root):]:
            continue
        with open(p, encoding="utf-8", errors="replace") as f:
            yield f.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=".", help="repository root (default: .)")
    ap.add_argument("--out", default="model/tokenizer/testdata/hf")
    ap.add_argument("--vocab", type=int, default=6000, help="BPE vocabulary size before the added tokens")
    args = ap.parse_args()
    corpus_path = os.path.join(args.root, "model/tokenizer/testdata/golden/strings.jsonl.gz")
    with gzip.open(corpus_path, "rt", encoding="utf-8") as f:
        corpus = [json.loads(line) for line in f]
    if not corpus or not all(isinstance(s, str) for s in corpus):
        sys.exit("tokenizer_parity: %s: expected one JSON string per line" % corpus_path)
    training = list(repo_text(args.root)) + corpus[::2]
    tok = build(args.vocab, training)

    folder = os.path.join(args.out, NAME)
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    added = {str(tok.token_to_id(s)): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                                       "single_word": False, "special": s in SPECIAL} for s in SPECIAL + NON_SPECIAL}
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": added,
                   "additional_special_tokens": SPECIAL[1:], "bos_token": None, "clean_up_tokenization_spaces": False,
                   "eos_token": "<|im_end|>", "errors": "replace", "model_max_length": 32768,
                   "pad_token": "<|endoftext|>", "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer",
                   "unk_token": None}, f, indent=2)
        f.write("\n")

    ordinary = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    ordinary.encode_special_tokens = True  # split_special_tokens=True: specials as plain text
    lines, n_ids, n_ord = [], 0, 0
    for s in corpus:
        ids = tok.encode(s).ids
        rec = {"ids": ids}
        o = ordinary.encode(s).ids
        if o != ids:
            rec["ordinary"] = o
            n_ord += 1
        rec["text"] = tok.decode(ids, skip_special_tokens=False)
        rec["skip"] = tok.decode(ids, skip_special_tokens=True)
        n_ids += len(ids)
        lines.append(json.dumps(rec, ensure_ascii=False))
    golden = os.path.join(args.out, NAME + ".golden.jsonl.gz")
    with gzip.GzipFile(golden, "wb", mtime=0) as f:  # mtime 0: the same bytes on every run
        f.write(("\n".join(lines) + "\n").encode("utf-8"))
    with open(os.path.join(args.out, NAME + ".meta.json"), "w") as f:
        json.dump({"tokenizers": tokenizers.__version__, "vocab_size": tok.get_vocab_size(with_added_tokens=True),
                   "strings": len(corpus), "ids": n_ids, "strings_with_special_text": n_ord,
                   "training_texts": len(training)}, f, indent=1)
        f.write("\n")
    print("tokenizers %s: %d tokens (with added), %d strings, %d ids, %d strings where specials split differently"
          % (tokenizers.__version__, tok.get_vocab_size(with_added_tokens=True), len(corpus), n_ids, n_ord))
    print("wrote %s and %s" % (folder, golden))


if __name__ == "__main__":
    main()
