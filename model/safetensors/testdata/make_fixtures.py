#!/usr/bin/env python3
"""Writes the safetensors fixtures of the Go tests, by hand, with struct and json.

The file format is written here independently of the Go code (the safetensors
Python package is not used): 8-byte little-endian header length, JSON header,
data buffer. Two groups:

  neg_*.safetensors   malformed files; negative.json says which error kind
                      (the Go Err* name) and which tensor each must report.
  pos_mixed.safetensors  a valid file with F32/BF16/F16/I8 tensors, an empty
                      tensor, a rank-0 scalar, metadata, entries in non-offset
                      order and an unknown field; pos_mixed.json has the values.
  golden_conv.safetensors  (needs torch) float32 inputs with torch's bfloat16
                      and float16 roundings, and every float16 bit pattern
                      (f16_all, also read as the 65536 bfloat16 patterns) with
                      torch's float32 widening of each.

Run from this folder with a Python that has torch (Debian: /usr/bin/python3):
    /usr/bin/python3 make_fixtures.py
"""
import json
import random
import struct
import sys


def header_bytes(obj, pad=True):
    h = json.dumps(obj, separators=(",", ":")).encode()
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    return h


def build(entries, data, metadata=None, pad=True):
    """entries: list of (name, dtype, shape, begin, end) in header order."""
    obj = {}
    if metadata is not None:
        obj["__metadata__"] = metadata
    for name, dtype, shape, b, e in entries:
        obj[name] = {"dtype": dtype, "shape": shape, "data_offsets": [b, e]}
    h = header_bytes(obj, pad)
    return struct.pack("<Q", len(h)) + h + data


def raw_file(header_text, data=b""):
    h = header_text.encode() if isinstance(header_text, str) else header_text
    return struct.pack("<Q", len(h)) + h + data


def f32s(vals):
    return struct.pack("<%df" % len(vals), *vals)


def negatives():
    cases = {}
    four = f32s([1, 2, 3, 4])
    ok = [("a", "F32", [2], 0, 8), ("b", "F32", [2], 8, 16)]
    cases["neg_truncated"] = (build(ok, four)[:-3], "ErrIncompleteBuffer", "")
    cases["neg_trailing"] = (build(ok, four + b"\0\0\0\0"), "ErrIncompleteBuffer", "")
    cases["neg_overlap"] = (build([("a", "F32", [2], 0, 8), ("b", "F32", [2], 4, 12)], four[:12]),
                            "ErrInvalidOffset", "b")
    cases["neg_gap"] = (build([("a", "F32", [1], 0, 4), ("b", "F32", [2], 8, 16)], four),
                        "ErrInvalidOffset", "b")
    cases["neg_not_from_zero"] = (build([("a", "F32", [2], 4, 12)], four[:12]), "ErrInvalidOffset", "a")
    cases["neg_end_before_begin"] = (build([("a", "F32", [0], 0, 0), ("z", "F32", [0], 8, 4)], four[:8]),
                                     "ErrInvalidOffset", "z")
    h = header_bytes({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})
    cases["neg_header_past_end"] = (struct.pack("<Q", len(h) + 100) + h + four[:8], "ErrHeaderLength", "")
    cases["neg_header_too_large"] = (struct.pack("<Q", 100_000_001) + h + four[:8], "ErrHeaderTooLarge", "")
    cases["neg_short"] = (b"\x08\0\0\0", "ErrHeaderTooSmall", "")
    cases["neg_shape_mismatch"] = (build([("w", "F32", [3], 0, 8)], four[:8]), "ErrSizeMismatch", "w")
    cases["neg_bf16_size"] = (build([("w", "BF16", [2, 2], 0, 16)], four), "ErrSizeMismatch", "w")
    cases["neg_unknown_dtype"] = (build([("w", "F24", [2], 0, 8)], four[:8]), "ErrUnknownDType", "w")
    cases["neg_duplicate_key"] = (raw_file('{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                                           '"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', four[:8]),
                                  "ErrDuplicate", "w")
    cases["neg_duplicate_field"] = (raw_file('{"w":{"dtype":"F32","shape":[1],"shape":[2],"data_offsets":[0,8]}}',
                                             four[:8]), "ErrDuplicate", "w")
    cases["neg_metadata_number"] = (raw_file('{"__metadata__":{"format":1},'
                                             '"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', four[:4]),
                                    "ErrMetadata", "")
    cases["neg_bad_utf8"] = (raw_file(b'{"w\xff":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', four[:4]),
                             "ErrHeaderUTF8", "")
    cases["neg_not_json"] = (raw_file('{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}', four[:4]),
                             "ErrHeaderJSON", "")
    cases["neg_negative_dim"] = (raw_file('{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}', four[:4]),
                                 "ErrHeaderJSON", "w")
    cases["neg_float_offset"] = (raw_file('{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4.0]}}', four[:4]),
                                 "ErrHeaderJSON", "w")
    cases["neg_missing_offsets"] = (raw_file('{"w":{"dtype":"F32","shape":[1]}}', four[:4]), "ErrHeaderJSON", "w")
    cases["neg_overflow"] = (raw_file('{"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,4]}}',
                                      four[:4]), "ErrOverflow", "w")
    cases["neg_two_objects"] = (raw_file('{}{}'), "ErrHeaderJSON", "")
    expect = {}
    for name, (blob, kind, tensor) in sorted(cases.items()):
        with open(name + ".safetensors", "wb") as f:
            f.write(blob)
        expect[name + ".safetensors"] = {"kind": kind, "tensor": tensor}
    with open("negative.json", "w") as f:
        json.dump(expect, f, indent=1, sort_keys=True)
        f.write("\n")


def positive():
    # Values chosen so that every encoding holds them exactly.
    w32 = [0.5, -1.25, 3.0, 1e-3, -0.0, 65504.0]
    bf = [1.0, -2.0, 0.15625, 3.3895313892515355e38, float("inf"), -float("inf")]
    hf = [1.0, -0.5, 6.103515625e-05, 5.960464477539063e-08, 65504.0, -0.0]
    data = b""
    layout = []

    def add(name, dtype, shape, blob):
        nonlocal data
        layout.append((name, dtype, shape, len(data), len(data) + len(blob)))
        data += blob

    add("w.f32", "F32", [2, 3], f32s(w32))
    add("w.bf16", "BF16", [3, 2], b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:]
                                       for v in bf))
    add("w.f16", "F16", [6], struct.pack("<6e", *hf))
    add("empty", "F32", [0, 4], b"")
    add("scalar", "F32", [], f32s([7.5]))
    add("ids", "I8", [3], bytes([1, 2, 255]))
    # Header entries in reverse order of the data, plus a field the format
    # does not define, which readers must skip.
    obj = {"__metadata__": {"format": "pt", "note": "hand written"}}
    for name, dtype, shape, b, e in reversed(layout):
        obj[name] = {"dtype": dtype, "shape": shape, "data_offsets": [b, e], "extra": [1, {"x": None}]}
    h = header_bytes(obj)
    with open("pos_mixed.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)
    with open("pos_mixed.json", "w") as f:
        def bits32(vals):
            return [struct.unpack("<I", struct.pack("<f", v))[0] for v in vals]
        json.dump({"metadata": obj["__metadata__"],
                   "tensors": {"w.f32": {"shape": [2, 3], "f32_bits": bits32(w32)},
                               "w.bf16": {"shape": [3, 2], "f32_bits": bits32(bf)},
                               "w.f16": {"shape": [6], "f32_bits": bits32(hf)},
                               "empty": {"shape": [0, 4], "f32_bits": []},
                               "scalar": {"shape": [], "f32_bits": bits32([7.5])}},
                   "unsupported": "ids"}, f, indent=1, sort_keys=True)
        f.write("\n")


def golden():
    import torch
    rng = random.Random(20261121)
    bits = [0x00000000, 0x80000000, 0x3F800000, 0x7F800000, 0xFF800000, 0x7F7FFFFF, 0xFF7FFFFF,
            0x00000001, 0x807FFFFF, 0x00800000, 0x3F808000, 0x3F818000, 0x3F80FFFF, 0x3F817FFF,
            0x477FE000, 0x477FEFFF, 0x477FF000, 0x47800000, 0x387FC000, 0x38800000, 0x33000000,
            0x33000001, 0x337FFFFF, 0x32FFFFFF, 0x33800000, 0x33C00000, 0x34400000, 0x38000000]
    # Exact ties and near-ties for both roundings, across exponents.
    for _ in range(3000):
        e = rng.randrange(1, 255)
        m = rng.randrange(0, 1 << 23)
        s = rng.randrange(2) << 31
        bits.append(s | e << 23 | (m & ~0xFFFF) | 0x8000)          # bf16 tie
        bits.append(s | e << 23 | (m & ~0x1FFF) | 0x1000)          # f16 tie (normal range)
        bits.append(s | e << 23 | (m & ~0xFFFF) | 0x8000 + rng.choice([-1, 1]))
    # The float16 subnormal and overflow ranges, densely.
    for _ in range(6000):
        e = rng.randrange(100, 145)
        bits.append(rng.randrange(2) << 31 | e << 23 | rng.randrange(0, 1 << 23))
    for _ in range(8000):
        bits.append(rng.randrange(0, 1 << 32))
    bits = [b for b in bits if not ((b >> 23) & 0xFF == 0xFF and b & 0x7FFFFF)]  # NaNs: see below
    bits += [0x7FC00000, 0xFFC00000, 0x7F800001, 0x7F80FFFF, 0x7FBF0000, 0xFF800001]
    x = torch.tensor(bits, dtype=torch.int64).to(torch.int32).view(torch.float32)
    to_bf16 = x.to(torch.bfloat16).view(torch.int16)
    to_f16 = x.to(torch.float16).view(torch.int16)
    all16 = torch.arange(0, 65536, dtype=torch.int32).to(torch.int16)
    f16_wide = all16.view(torch.float16).to(torch.float32)
    bf16_wide = all16.view(torch.bfloat16).to(torch.float32)

    def blob(t):
        return t.contiguous().numpy().tobytes()

    tensors = [("f32_in", "F32", [len(bits)], blob(x)),
               ("bf16_of_f32_in", "BF16", [len(bits)], blob(to_bf16)),
               ("f16_of_f32_in", "F16", [len(bits)], blob(to_f16)),
               ("f16_all", "F16", [65536], blob(all16)),
               ("f32_of_f16_all", "F32", [65536], blob(f16_wide)),
               ("f32_of_bf16_all", "F32", [65536], blob(bf16_wide))]
    data = b""
    layout = []
    for name, dtype, shape, b in tensors:
        layout.append((name, dtype, shape, len(data), len(data) + len(b)))
        data += b
    with open("golden_conv.safetensors", "wb") as f:
        f.write(build(layout, data, {"format": "pt", "torch": torch.__version__}))


if __name__ == "__main__":
    negatives()
    positive()
    if "--no-torch" not in sys.argv:
        golden()
