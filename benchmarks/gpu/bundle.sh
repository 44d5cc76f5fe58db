#!/usr/bin/env bash
# bundle.sh [BASE]: builds the CPU binaries that run_on_gpu.sh's amx, amxab,
# tiles and attn stages run on the device machine's host (no Go there):
# package gemm's, model's, pages' and probe's tests, benchmarks/cpu and its memstep, into
# .gpu/, and with BASE (a commit) model's tests and benchmarks/cpu of that
# commit into .gpu/base/ (the "before" side of the A/B stages), then packs
# them into .gpub/bundle.tar.gz, the one path to carry:
#
#	bash benchmarks/gpu/bundle.sh 2f68ca8
#	run(command="DEADLINE_S=280 bash benchmarks/gpu/run_on_gpu.sh attn", carry=[".gpub"], timeout_s=300)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
mkdir -p .gpu/base .gpub
build() { # build DIR: the binaries of the tree at DIR (cpu.test where it has model/cpu) into .gpu/$2
	local dir=$1 out=$2
	(cd "$dir" && CGO_ENABLED=0 go test -ldflags='-s -w' -c -o "$out/model.test" ./model &&
		{ [ ! -d model/cpu ] || CGO_ENABLED=0 go test -ldflags='-s -w' -c -o "$out/cpu.test" ./model/cpu; } &&
		CGO_ENABLED=0 go build -ldflags='-s -w' -o "$out/cpubench" ./benchmarks/cpu)
}
build "$ROOT" "$ROOT/.gpu"
CGO_ENABLED=0 go test -ldflags='-s -w' -c -o .gpu/gemm.test ./model/cpu/gemm
CGO_ENABLED=0 go build -ldflags='-s -w' -o .gpu/memstep ./benchmarks/cpu/memstep
CGO_ENABLED=0 go test -ldflags='-s -w' -c -o .gpu/pages.test ./internal/pages
CGO_ENABLED=0 go test -ldflags='-s -w' -c -o .gpu/probe.test ./benchmarks/internal/probe
files=(gemm.test model.test cpu.test cpubench memstep pages.test probe.test)
if [ $# -ge 1 ]; then
	wt=$(mktemp -d)
	trap 'git -C "$ROOT" worktree remove --force "$wt" >/dev/null 2>&1 || true' EXIT
	git worktree add -q --detach "$wt" "$1"
	build "$wt" "$ROOT/.gpu/base"
	files+=(base/model.test base/cpubench)
	[ ! -e .gpu/base/cpu.test ] || files+=(base/cpu.test)
fi
tar -czf .gpub/bundle.tar.gz -C .gpu "${files[@]}"
ls -l .gpub/bundle.tar.gz
