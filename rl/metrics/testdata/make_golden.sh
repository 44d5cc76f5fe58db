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
# With python3-protobuf installed, Google's protobuf runtime must agree.
for py in python3 /usr/bin/python3; do
	if $py -c 'import google.protobuf' 2>/dev/null; then
		$py testdata/check_protobuf.py testdata/golden.tfevents | cmp - testdata/golden.tfevents.json
		echo "protobuf runtime agrees with read_tfevents.py"
		break
	fi
done
python3 testdata/console_ref.py > testdata/console_golden.json
