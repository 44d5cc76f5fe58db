#!/bin/sh
# Rebuilds the TensorBoard golden: the Go writer writes golden.tfevents with a
# fixed clock, and the independent Python reader (read_tfevents.py: its own
# CRC-32C and protobuf decoding) dumps what it finds in it. Review the dump
# by eye before committing it: it is the reference the Go test checks against.
# Also rebuilds the console golden from Python's repr.
set -e
cd "$(dirname "$0")/.."
go test -run 'TestTensorBoardGolden$' -update . >/dev/null || true
python3 testdata/read_tfevents.py testdata/golden.tfevents > testdata/golden.tfevents.json
python3 testdata/console_ref.py > testdata/console_golden.json
