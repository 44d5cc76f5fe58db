#!/usr/bin/env python3
"""Checks a Hugging Face folder written by model.SaveFolder, independently.

Usage: ckpt_check.py REF_F32_FOLDER FOLDER
REF_F32_FOLDER holds the same tensors saved in float32. The script reads both
by hand (struct + json, single file or index + shards) and checks, with torch
as the reference for rounding:
  - every header is padded with spaces to 8 and carries {"format": "pt"};
  - with an index: total_size is the sum of tensor bytes, every weight_map
    entry is held by its shard, and no shard holds an unlisted tensor;
  - config.json's dtype keys name the stored dtype;
  - tied embeddings => no lm_head.weight;
  - every tensor equals torch's conversion of the float32 reference, bit for bit.
Prints "ok <n tensors>" or exits 1 with a message.
"""
import json
import os
import struct
import sys

import torch

DT = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
TORCH_NAME = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}


def fail(msg):
    print(msg)
    sys.exit(1)


def read_file(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    if n % 8:
        fail("%s: header length %d not a multiple of 8" % (path, n))
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    if header.pop("__metadata__", None) != {"format": "pt"}:
        fail("%s: metadata is not {'format': 'pt'}" % path)
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        raw = bytearray(blob[8 + n + b:8 + n + e])
        t = torch.frombuffer(raw, dtype=DT[info["dtype"]]) if raw else torch.empty(0, dtype=DT[info["dtype"]])
        out[name] = (info["dtype"], t.reshape(info["shape"]), e - b)
    return out


def read_folder(d):
    single = os.path.join(d, "model.safetensors")
    if os.path.exists(single):
        return {k: v[:2] for k, v in read_file(single).items()}
    index = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    shards, total = {}, 0
    for shard in sorted(set(index["weight_map"].values())):
        shards[shard] = read_file(os.path.join(d, shard))
    out = {}
    for shard, ts in shards.items():
        for name, (dt, t, nbytes) in ts.items():
            if index["weight_map"].get(name) != shard:
                fail("%s holds %s, which the index maps to %s" % (shard, name, index["weight_map"].get(name)))
            out[name] = (dt, t)
            total += nbytes
    if set(out) != set(index["weight_map"]):
        fail("index lists tensors no shard holds: %s" % sorted(set(index["weight_map"]) - set(out)))
    if index["metadata"]["total_size"] != total:
        fail("total_size %d, tensors hold %d bytes" % (index["metadata"]["total_size"], total))
    return out


def main(ref_dir, d):
    ref = read_folder(ref_dir)
    got = read_folder(d)
    cfg = json.load(open(os.path.join(d, "config.json")))
    dtypes = {dt for dt, _ in got.values()}
    if len(dtypes) != 1:
        fail("mixed dtypes %s" % dtypes)
    dt = dtypes.pop()
    for key in ("torch_dtype", "dtype"):
        if key in cfg and cfg[key] != TORCH_NAME[dt]:
            fail("config.json %s = %s, tensors are %s" % (key, cfg[key], dt))
    if cfg.get("tie_word_embeddings") and "lm_head.weight" in got:
        fail("tied config but lm_head.weight stored")
    if set(got) != set(ref):
        fail("tensor sets differ: %s" % sorted(set(got) ^ set(ref)))
    for name, (_, t) in got.items():
        want = ref[name][1].to(t.dtype)
        if t.shape != want.shape:
            fail("%s: shape %s, want %s" % (name, list(t.shape), list(want.shape)))
        iv = torch.int16 if t.element_size() == 2 else torch.int32
        if not torch.equal(t.view(iv), want.view(iv)):
            fail("%s: values differ from torch's conversion" % name)
    print("ok %d" % len(got))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
