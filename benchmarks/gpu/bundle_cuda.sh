#!/usr/bin/env bash
# bundle_cuda.sh: builds the binaries run_on_gpu.sh's GPU stages (tc, final,
# first) run on the device machine, which has no Go: package cuda's tests,
# benchmarks/cuda, benchmarks/gpubench, cmd/train and the random-folder
# maker memstep, into .gpu/, then packs them into .gpub/cuda.tar.gz, the one
# path to carry (run_on_gpu.sh unpacks every .gpub/*.tar.* into .gpu/):
#
#	bash benchmarks/gpu/bundle_cuda.sh
#	run(command="DEADLINE_S=480 bash benchmarks/gpu/run_on_gpu.sh tc", carry=[".gpub"], timeout_s=540)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
mkdir -p .gpu .gpub
export CGO_ENABLED=0
go test -ldflags='-s -w' -c -o .gpu/cuda.test ./cuda
go build -ldflags='-s -w' -o .gpu/cudabench ./benchmarks/cuda
go build -ldflags='-s -w' -o .gpu/r1go-gpu-bench ./benchmarks/gpubench
go build -ldflags='-s -w' -o .gpu/train ./cmd/train
go build -ldflags='-s -w' -o .gpu/memstep ./benchmarks/cpu/memstep
tar -czf .gpub/cuda.tar.gz -C .gpu cuda.test cudabench r1go-gpu-bench train memstep
ls -l .gpub/cuda.tar.gz
