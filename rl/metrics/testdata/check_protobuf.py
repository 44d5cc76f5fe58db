#!/usr/bin/env python3
"""Second opinion on an event file: decode each record with Google's protobuf
runtime instead of by hand.

The message types are built at run time with the field numbers, types and
oneofs of TensorFlow's event.proto and summary.proto (the parts r1go writes),
so neither TensorFlow nor generated code is needed. The TFRecord framing and
its CRCs are checked by read_tfevents.py, whose reader this reuses. The output
has the same shape as read_tfevents.py's.

Needs the Debian package python3-protobuf. Usage: check_protobuf.py FILE
"""

import json
import os
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

sys.dont_write_bytecode = True  # no __pycache__ in testdata
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import read_tfevents  # noqa: E402

F = descriptor_pb2.FieldDescriptorProto


def build():
    fd = descriptor_pb2.FileDescriptorProto(name="r1go_event.proto", package="tensorflow", syntax="proto3")

    summary = fd.message_type.add(name="Summary")
    value = summary.nested_type.add(name="Value")
    value.oneof_decl.add(name="value")
    value.field.add(name="node_name", number=7, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL, oneof_index=0)
    value.field.add(name="obsolete_old_style_histogram", number=3, type=F.TYPE_BYTES,
                    label=F.LABEL_OPTIONAL, oneof_index=0)
    summary.field.add(name="value", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                      type_name=".tensorflow.Summary.Value")

    event = fd.message_type.add(name="Event")
    event.oneof_decl.add(name="what")
    event.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
    event.field.add(name="graph_def", number=4, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL, oneof_index=0)
    event.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, oneof_index=0,
                    type_name=".tensorflow.Summary")

    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("tensorflow.Event"))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    Event = build()
    path = sys.argv[1]
    with open(path, "rb") as f:
        data = f.read()
    records, off = [], 0
    # Framing as read_tfevents.read does, with its CRC check.
    while off < len(data):
        (length,) = struct.unpack("<Q", data[off:off + 8])
        body = data[off + 12:off + 12 + length]
        (crc,) = struct.unpack("<I", data[off + 12 + length:off + 16 + length])
        if crc != read_tfevents.masked_crc(body):
            sys.exit("%s: offset %d: data crc mismatch" % (path, off))
        ev = Event()
        ev.ParseFromString(body)
        rec = {"offset": off, "wall_time": ev.wall_time, "step": ev.step, "values": []}
        kind = ev.WhichOneof("what")
        if kind == "file_version":
            rec["file_version"] = ev.file_version
        elif kind == "summary":
            for v in ev.summary.value:
                if v.WhichOneof("value") == "simple_value":
                    bits = struct.unpack("<I", struct.pack("<f", v.simple_value))[0]
                    rec["values"].append({"tag": v.tag, "simple_value": read_tfevents.number(v.simple_value),
                                          "bits": "%08x" % bits})
        elif kind is not None:
            sys.exit("%s: offset %d: unexpected event kind %s" % (path, off, kind))
        if ev.UnknownFields() if hasattr(ev, "UnknownFields") else False:
            sys.exit("%s: offset %d: unknown fields in event" % (path, off))
        records.append(rec)
        off += 16 + length
    json.dump({"records": records}, sys.stdout, indent=1, sort_keys=True, allow_nan=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
