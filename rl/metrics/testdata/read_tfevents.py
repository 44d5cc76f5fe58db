#!/usr/bin/env python3
"""Independent reader for TensorFlow event files, used to check r1go's writer.

It needs neither TensorFlow nor TensorBoard nor the protobuf package: it
parses the TFRecord framing, checks both masked CRC-32C checksums of every
record with its own CRC-32C, and decodes tensorflow.Event by hand from the
protobuf wire format. It prints one JSON document:

  {"records": [{"offset": 0, "wall_time": 1.5, "step": 0,
                "file_version": "brain.Event:2", "values": []}, ...]}

where each value is {"tag": ..., "simple_value": ..., "bits": "3e800000"}
("bits" is the float32's IEEE bits in hex, so NaN and Inf compare exactly;
"simple_value" is the number, or "nan"/"inf"/"-inf").

Usage: read_tfevents.py FILE > dump.json   (exit status 1 on a bad file)
"""

import json
import math
import struct
import sys

# CRC-32C (Castagnoli), reflected polynomial 0x82F63B78, table driven.
_POLY = 0x82F63B78
_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ _POLY if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# The standard check value of CRC-32C (RFC 3720 appendix B.4 test vectors).
assert crc32c(b"123456789") == 0xE3069283
assert crc32c(bytes(32)) == 0x8A9136AA


class Bad(Exception):
    pass


def read_varint(buf, pos):
    result, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise Bad("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise Bad("varint too long")


def fields(buf):
    """Yield (field number, wire type, value) for each field of a message."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, pos = read_varint(buf, pos)
        elif wire == 1:
            if pos + 8 > len(buf):
                raise Bad("truncated fixed64")
            val, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = read_varint(buf, pos)
            if pos + n > len(buf):
                raise Bad("truncated length-delimited field %d" % num)
            val, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            if pos + 4 > len(buf):
                raise Bad("truncated fixed32")
            val, pos = buf[pos:pos + 4], pos + 4
        else:
            raise Bad("unsupported wire type %d" % wire)
        yield num, wire, val


def number(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def decode_value(buf):
    out = {}
    for num, wire, val in fields(buf):
        if num == 1 and wire == 2:
            out["tag"] = val.decode("utf-8")
        elif num == 2 and wire == 5:
            (f,) = struct.unpack("<f", val)
            out["simple_value"] = number(f)
            out["bits"] = "%08x" % struct.unpack("<I", val)[0]
    return out


def decode_event(buf):
    ev = {"wall_time": 0.0, "step": 0, "values": []}
    for num, wire, val in fields(buf):
        if num == 1 and wire == 1:
            (ev["wall_time"],) = struct.unpack("<d", val)
        elif num == 2 and wire == 0:
            ev["step"] = val - (1 << 64) if val >= 1 << 63 else val
        elif num == 3 and wire == 2:
            ev["file_version"] = val.decode("utf-8")
        elif num == 5 and wire == 2:
            for snum, swire, sval in fields(val):
                if snum == 1 and swire == 2:
                    ev["values"].append(decode_value(sval))
    return ev


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    records, off = [], 0
    while off < len(data):
        if len(data) - off < 12:
            raise Bad("offset %d: truncated header" % off)
        header = data[off:off + 8]
        (length,) = struct.unpack("<Q", header)
        (len_crc,) = struct.unpack("<I", data[off + 8:off + 12])
        if len_crc != masked_crc(header):
            raise Bad("offset %d: length crc mismatch" % off)
        end = off + 12 + length
        if end + 4 > len(data):
            raise Bad("offset %d: truncated record" % off)
        body = data[off + 12:end]
        (data_crc,) = struct.unpack("<I", data[end:end + 4])
        if data_crc != masked_crc(body):
            raise Bad("offset %d: data crc mismatch" % off)
        ev = decode_event(body)
        ev["offset"] = off
        records.append(ev)
        off = end + 4
    return {"records": records}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    try:
        dump = read(sys.argv[1])
    except (Bad, UnicodeDecodeError) as e:
        sys.stderr.write("%s: %s\n" % (sys.argv[1], e))
        sys.exit(1)
    json.dump(dump, sys.stdout, indent=1, sort_keys=True, allow_nan=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
