#!/usr/bin/env python3
"""Checks a safetensors file written by the Go writer, independently of it.

Usage: check_go_file.py FILE
The file must hold, for some names X, an F32 tensor "X.src" and tensors
"X.bf16" (BF16) and/or "X.f16" (F16) of the same shape. The script parses the
file by hand (struct + json), then checks with torch as the reference:
  - the header is padded with spaces to a multiple of 8 and is compact JSON;
  - __metadata__ is {"format": "pt"};
  - entries appear in descending dtype alignment, then name order, and their
    offsets tile the buffer from 0;
  - X.bf16 == torch's float32 -> bfloat16 of X.src, X.f16 likewise
    (bit-exact, NaN positions only compared as NaN).
Prints "ok <n tensors>" or exits 1 with a message.
"""
import json
import struct
import sys

import torch

ORDER = ["BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "I16", "U16",
         "F16", "BF16", "I32", "U32", "F32", "C64", "F64", "I64", "U64"]
TORCH = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


def fail(msg):
    print(msg)
    sys.exit(1)


def main(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    if n % 8:
        fail("header length %d is not a multiple of 8" % n)
    text = blob[8:8 + n].decode("utf-8")
    body = text.rstrip(" ")
    if json.dumps(json.loads(body), separators=(",", ":")) != body:
        fail("header is not compact JSON: %r" % body[:200])
    pairs = json.loads(body, object_pairs_hook=lambda kv: kv)
    meta = [v for k, v in pairs if k == "__metadata__"]
    if meta != [[("format", "pt")]]:
        fail("metadata %r" % meta)
    entries = [(k, dict(v)) for k, v in pairs if k != "__metadata__"]
    keys = [(-ORDER.index(v["dtype"]), k) for k, v in entries]
    if keys != sorted(keys):
        fail("entries not in (descending dtype, name) order: %r" % [k for _, k in keys])
    data = blob[8 + n:]
    pos = 0
    tensors = {}
    for k, v in entries:
        b, e = v["data_offsets"]
        if b != pos:
            fail("%s starts at %d, expected %d" % (k, b, pos))
        pos = e
        dt = TORCH[v["dtype"]]
        t = torch.frombuffer(bytearray(data[b:e]), dtype=dt) if e > b else torch.empty(0, dtype=dt)
        tensors[k] = t.reshape(v["shape"])
    if pos != len(data):
        fail("buffer has %d bytes, tensors end at %d" % (len(data), pos))
    checked = 0
    for k, src in tensors.items():
        if not k.endswith(".src"):
            continue
        base = k[:-4]
        for suffix, dt in ((".bf16", torch.bfloat16), (".f16", torch.float16)):
            if base + suffix not in tensors:
                continue
            got = tensors[base + suffix]
            want = src.to(dt)
            if got.shape != want.shape:
                fail("%s shape %r, want %r" % (base + suffix, got.shape, want.shape))
            nan = torch.isnan(want)
            if not torch.equal(torch.isnan(got), nan):
                fail("%s: NaN positions differ" % (base + suffix))
            g = got.view(torch.int16)[~nan]
            w = want.view(torch.int16)[~nan]
            if not torch.equal(g, w):
                i = int((g != w).nonzero()[0])
                fail("%s: element %d is %#06x, torch gives %#06x" % (base + suffix, i, int(g[i]) & 0xFFFF,
                                                                    int(w[i]) & 0xFFFF))
            checked += 1
    if checked == 0:
        fail("no X.src / X.bf16 / X.f16 pairs found")
    print("ok %d" % checked)


if __name__ == "__main__":
    main(sys.argv[1])
