#!/usr/bin/env python3
"""Independent check of the parquet fixtures' footers (no pyarrow needed).

pyarrow is not packaged for Debian 12, so the fixtures are written by Go
(gen/main.go, parquet-go). This script reads their footers with its own
Thrift compact-protocol decoder, written from the parquet-format spec, and

  1. asserts the shape formats.md §3.7 gives for pyarrow-written files:
     optional group prompt (LIST) { repeated group list { optional group
     element|item { optional binary role (STRING); optional binary content
     (STRING); } } }, lists of strings as the same 3-level LIST, extra_info
     .index as int64, snappy on every column, a "huggingface" metadata entry;
  2. writes its reading of every footer to parquet_footers.txt, which the Go
     test TestParquetFootersMatchPython compares with parquet-go's reading.

Run from this folder: python3 check_parquet_footer.py
"""
import glob
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# Thrift compact protocol type codes.
STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)


class Reader:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def byte(self):
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def varint(self):
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def zigzag(self):
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, t):
        if t in (TRUE, FALSE):  # a bool field carries its value in the type
            return t == TRUE
        if t == BYTE:
            return self.byte()
        if t in (I16, I32, I64):
            return self.zigzag()
        if t == DOUBLE:
            v = struct.unpack("<d", self.buf[self.pos:self.pos + 8])[0]
            self.pos += 8
            return v
        if t == BINARY:
            n = self.varint()
            v = self.buf[self.pos:self.pos + n]
            self.pos += n
            return v
        if t in (LIST, SET):
            head = self.byte()
            size, et = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            if et in (TRUE, FALSE):  # list bools are one byte each
                return [self.byte() == 1 for _ in range(size)]
            return [self.value(et) for _ in range(size)]
        if t == MAP:
            size = self.varint()
            if size == 0:
                return {}
            kv = self.byte()
            return {self.value(kv >> 4): self.value(kv & 0x0F) for _ in range(size)}
        if t == STRUCT:
            fields, last = {}, 0
            while True:
                head = self.byte()
                if head == STOP:
                    return fields
                delta, ft = head >> 4, head & 0x0F
                fid = last + delta if delta else self.zigzag()
                fields[fid] = self.value(ft)
                last = fid
        raise ValueError("unknown thrift type %d" % t)


PHYSICAL = {0: "boolean", 1: "int32", 2: "int64", 3: "int96", 4: "float", 5: "double", 6: "binary", 7: "fixed_len_byte_array"}
REPETITION = {0: "required", 1: "optional", 2: "repeated"}
CONVERTED = {0: "UTF8", 3: "LIST", 18: "INT_64"}
LOGICAL = {1: "STRING", 3: "LIST", 10: "INTEGER"}
CODEC = {0: "UNCOMPRESSED", 1: "SNAPPY", 2: "GZIP", 6: "ZSTD"}


def footer(path):
    data = open(path, "rb").read()
    assert data[:4] == b"PAR1" and data[-4:] == b"PAR1", path
    (n,) = struct.unpack("<I", data[-8:-4])
    return Reader(data[-8 - n:-8]).value(STRUCT)


def describe(meta):
    """Renders a footer: the schema in preorder, then columns and metadata."""
    lines = []
    elems = meta[2]
    pos = 0

    def walk(depth):
        nonlocal pos
        e = elems[pos]
        pos += 1
        name = e[4].decode()
        rep = REPETITION.get(e.get(3), "root")
        kind = PHYSICAL[e[1]] if 1 in e else "group"
        notes = []
        if 6 in e:
            notes.append("converted=" + CONVERTED.get(e[6], str(e[6])))
        if 10 in e:
            (lid, lval), = e[10].items()
            note = LOGICAL.get(lid, str(lid))
            if lid == 10:
                note += "(%d,%s)" % (lval[1], "signed" if lval[2] else "unsigned")
            notes.append("logical=" + note)
        lines.append("  " * depth + " ".join([rep, kind, name] + notes))
        for _ in range(e.get(5, 0)):
            walk(depth + 1)

    walk(0)
    for rg in meta[4]:
        for chunk in rg[1]:
            md = chunk[3]
            lines.append("column %s codec=%s" % (".".join(p.decode() for p in md[3]), CODEC.get(md[4], str(md[4]))))
    for kv in meta.get(5, []):
        lines.append("kv " + kv[1].decode())  # the key; values are checked in check()
    lines.append("rows %d" % meta[3])
    return lines


def check(name, meta, lines):
    """Asserts the §3.7 shape."""
    elem = "item" if "_item" in name else "element"
    text = "\n".join(lines)
    prompt = "\n".join([
        "  optional group prompt converted=LIST logical=LIST",
        "    repeated group list",
        "      optional group %s" % elem,
        "        optional binary role converted=UTF8 logical=STRING",
        "        optional binary content converted=UTF8 logical=STRING",
    ])
    assert prompt in text, (name, "prompt shape")
    if name.startswith("searchr1"):
        for col in ("golden_answers", "target"):
            assert "optional group %s converted=LIST logical=LIST\n" % col in text, (name, col)
        assert "optional binary %s converted=UTF8 logical=STRING" % elem in text, (name, "string list element")
        assert "optional int64 index converted=INT_64 logical=INTEGER(64,signed)" in text, (name, "index")
    else:
        assert "    optional binary ground_truth converted=UTF8 logical=STRING" in text, (name, "ground_truth string")
    cols = [l for l in lines if l.startswith("column ")]
    assert cols and all(l.endswith("codec=SNAPPY") for l in cols), (name, "snappy")
    hf = [json.loads(kv[2]) for kv in meta.get(5, []) if kv[1] == b"huggingface"]
    assert len(hf) == 1 and "features" in hf[0]["info"], (name, "huggingface metadata")


def main():
    out = []
    for path in sorted(glob.glob(os.path.join(HERE, "*.parquet"))):
        name = os.path.basename(path)
        meta = footer(path)
        lines = describe(meta)
        check(name, meta, lines)
        out.append("== " + name)
        out.extend(lines)
    with open(os.path.join(HERE, "parquet_footers.txt"), "w") as f:
        f.write("\n".join(out) + "\n")
    print("checked", len(glob.glob(os.path.join(HERE, "*.parquet"))), "files")


if __name__ == "__main__":
    main()
