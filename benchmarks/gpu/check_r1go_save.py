#!/usr/bin/env python3
"""Loads Hugging Face folders that r1go saved (Model.Save) with transformers
and compares their logits with the golden of the fixture they came from.

r1go writes them in TestHFSaveForTransformers (benchmarks/gpu/hfparity_test.go)
when R1GO_SAVE_DIR is set: each fixture of model/testdata/hf, loaded by
model.Load and written back by Model.Save, as <R1GO_SAVE_DIR>/<fixture>.<dtype>/
for dtype float32 and bfloat16. For each such folder this script
  - loads it with Qwen2ForCausalLM.from_pretrained and fails on any missing,
    unexpected or mismatched tensor (output_loading_info),
  - checks config.json's dtype and tie_word_embeddings against the source,
  - runs the fixture's sequences in float64 (eager attention, CPU) and
    compares the logits with the fixture's reference: 1e-4 relative when
    the save is lossless (float32, or bfloat16 of a bfloat16 fixture),
    6e-2 when r1go rounded float32 weights to bfloat16,
  - compares the saved weights with the source folder's, tensor by tensor,
    through transformers' state_dict: bit-equal, after torch's own bfloat16
    rounding of the source when r1go saved bfloat16.

Usage, from the repository root:
    python3 benchmarks/gpu/check_r1go_save.py SAVE_DIR [--golden model/testdata/hf]
Exit status 1 when any folder fails; a table is printed last.
"""
import argparse
import json
import os
import sys

try:
    import torch
    import transformers
    from transformers import Qwen2ForCausalLM
    from safetensors import safe_open
except ImportError as e:
    sys.exit("check_r1go_save: %s; run this where transformers is installed (the GPU machine), "
             "see benchmarks/gpu/README.md" % e)

TOL_EXACT = 1e-4
TOL_BF16_SAVE = 6e-2  # every float32 weight rounded once; hfparity_test.go's tolBF16Save


def load(folder, dtype):
    major_minor = tuple(int(x) for x in transformers.__version__.split(".")[:2])
    key = "dtype" if major_minor >= (4, 56) else "torch_dtype"
    model, info = Qwen2ForCausalLM.from_pretrained(folder, attn_implementation="eager",
                                                   output_loading_info=True, **{key: dtype})
    return model.eval(), info


def golden(golden_dir, name):
    with open(os.path.join(golden_dir, name + ".golden.json")) as f:
        meta = json.load(f)
    with safe_open(os.path.join(golden_dir, name + ".golden.safetensors"), "pt") as f:
        logits = f.get_tensor("logits")
    return meta, logits


def rel_err(got, want):
    return float((got.double() - want.double()).abs().max() / want.double().abs().max().clamp_min(1e-30))


@torch.no_grad()
def check(saved, name, dtype, golden_dir):
    meta, want = golden(golden_dir, name)
    with open(os.path.join(saved, "config.json")) as f:
        cfg = json.load(f)
    problems = []
    got_dtype = cfg.get("dtype", cfg.get("torch_dtype"))
    if got_dtype != dtype:
        problems.append("config dtype %r, expected %r" % (got_dtype, dtype))
    if bool(cfg.get("tie_word_embeddings")) != meta["tied"]:
        problems.append("tie_word_embeddings %r, the source has %r" % (cfg.get("tie_word_embeddings"), meta["tied"]))
    model, info = load(saved, torch.float64)
    for k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        if info.get(k):
            problems.append("%s: %s" % (k, sorted(map(str, info[k]))[:5]))
    out, start = [], 0
    for n in meta["seq_lens"]:
        out.append(model(input_ids=torch.tensor([meta["tokens"][start:start + n]])).logits[0])
        start += n
    got = torch.cat(out)
    lossless = dtype == "float32" or meta["dtype"] == "bfloat16"
    tol = TOL_EXACT if lossless else TOL_BF16_SAVE
    err = rel_err(got, want)
    if not err <= tol:
        problems.append("logits %.3g from the fixture's reference, over %g" % (err, tol))
    source, _ = load(os.path.join(golden_dir, name), torch.float64)
    src = source.state_dict()
    worst = 0.0
    for k, v in model.state_dict().items():
        w = src[k].to(torch.bfloat16).double() if dtype == "bfloat16" else src[k]
        d = float((v - w).abs().max()) if v.numel() else 0.0
        worst = max(worst, d)
        if d != 0:  # r1go rounds to bfloat16 ties-to-even, as torch does: equal either way
            problems.append("tensor %s differs from the source by %.3g" % (k, d))
    return err, tol, worst, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("save_dir", help="folder holding <fixture>.<dtype>/ folders written by r1go")
    ap.add_argument("--golden", default="model/testdata/hf", help="fixture folder (default: model/testdata/hf)")
    args = ap.parse_args()
    entries = sorted(e for e in os.listdir(args.save_dir) if os.path.isdir(os.path.join(args.save_dir, e)))
    if not entries:
        sys.exit("check_r1go_save: %s holds no saved folders" % args.save_dir)
    rows, failed = [], False
    for e in entries:
        name, _, dtype = e.rpartition(".")
        if dtype not in ("float32", "bfloat16") or not name:
            sys.exit("check_r1go_save: %s: folder name is not <fixture>.<float32|bfloat16>" % e)
        err, tol, worst, problems = check(os.path.join(args.save_dir, e), name, dtype, args.golden)
        for p in problems:
            print("FAIL %s: %s" % (e, p))
        failed |= bool(problems)
        rows.append((e, err, tol, worst, "ok" if not problems else "FAIL"))
    print("transformers %s, torch %s" % (transformers.__version__, torch.__version__))
    print("%-40s %12s %8s %14s %s" % ("r1go-saved folder", "logits err", "tol", "max |w-w_src|", "result"))
    for r in rows:
        print("%-40s %12.3g %8g %14.3g %s" % r)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
