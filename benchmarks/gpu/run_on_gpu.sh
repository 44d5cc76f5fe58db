#!/bin/bash
# Runs the GPU machine's share of the parity and speed work, from the
# repository root, with what was built and carried from the development
# machine in .gpu/ (benchmarks/gpu/README.md says how). There is no Go and
# no network on that machine: only python3 (torch, transformers, tokenizers,
# tensorboard) and the carried binaries.
#
#   bash benchmarks/gpu/run_on_gpu.sh parity   fixtures, Go tests, read-backs (~2 min)
#   bash benchmarks/gpu/run_on_gpu.sh bench    the speed table (~5 min)
#   bash benchmarks/gpu/run_on_gpu.sh all      both (may not fit one 10-minute call)
#
# Everything goes to $OUT (default /tmp/gpu-out): parity.log, bench.log,
# fixtures.tar.gz (the new fixture folders, to unpack at the repository root
# and commit), transformers_bench.json. A status table is printed last; the
# exit status is 1 when any step failed.
set -u
stage=${1:-all}
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
ROOT=$PWD
BIN=$ROOT/.gpu/parity
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
declare -a STATUS

# Package cuda compiles its kernels with NVRTC at run time, or reads them
# from a carried cache (go run ./benchmarks/cuda -precompile .gpu/kernels).
if [ -z "${R1GO_CUDA_CACHE:-}" ] && [ -d "$ROOT/.gpu/kernels" ]; then
	export R1GO_CUDA_CACHE=$ROOT/.gpu/kernels
fi
# NVRTC and cuBLAS: the loader's, else the toolkit's or PyTorch's wheels'.
findlib() { # findlib VAR GLOB: sets VAR to a library matching GLOB unless the loader knows one
	[ -n "${!1:-}" ] && return
	ldconfig -p 2>/dev/null | grep -q "${2%%.so*}.so" && return
	local f
	f=$(find /usr/local /opt -name "$2" 2>/dev/null | sort -r | head -1)
	[ -n "$f" ] && export "$1=$f"
}
findlib R1GO_NVRTC 'libnvrtc.so.1[23]'
findlib R1GO_CUBLAS 'libcublas.so.1[23]'

step() { # step NAME LOG COMMAND...: runs the command, appends to LOG, records PASS/FAIL
	local name=$1 log=$2
	shift 2
	echo "=== $name: $*" | tee -a "$log"
	local t0=$SECONDS
	"$@" 2>&1 | tee -a "$log"
	local rc=${PIPESTATUS[0]}
	STATUS+=("$(printf '%-44s %s (%ds)' "$name" "$([ "$rc" = 0 ] && echo PASS || echo "FAIL rc=$rc")" $((SECONDS - t0)))")
}

parity() {
	local log=$OUT/parity.log
	nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$log" 2>&1
	step "transformers fixtures" "$log" python3 benchmarks/gpu/make_hf_fixtures.py --out model/testdata/hf
	step "tokenizers fixture" "$log" python3 benchmarks/gpu/tokenizer_parity.py --out model/tokenizer/testdata/hf
	tar -czf "$OUT/fixtures.tar.gz" model/testdata/hf model/tokenizer/testdata/hf 2>>"$log"
	local test=$BIN/gpu_cuda.test
	[ -x "$test" ] || test=$BIN/gpu.test # built without the CUDA device
	rm -rf /tmp/r1go_saved /tmp/r1go_tbrun
	# A Go test binary runs in its package's folder (fixture paths are relative).
	step "Go parity tests ($(basename "$test"))" "$log" env R1GO_SAVE_DIR=/tmp/r1go_saved R1GO_METRICS_DIR=/tmp/r1go_tbrun \
		bash -c "cd '$ROOT/benchmarks/gpu' && '$test' -test.v"
	step "transformers loads r1go's saves" "$log" python3 benchmarks/gpu/check_r1go_save.py /tmp/r1go_saved
	step "tensorboard reads r1go's events" "$log" python3 benchmarks/gpu/tb_readback.py /tmp/r1go_tbrun
	if [ -x "$ROOT/.gpu/cuda.test" ]; then # package cuda's own tests, built by its owner
		step "cuda package tests" "$log" bash -c "cd '$ROOT/cuda' && '$ROOT/.gpu/cuda.test' -test.v"
	fi
}

bench() {
	local log=$OUT/bench.log r1go=()
	# r1go's GPU side of the table, when a binary for it was carried
	# (README.md: the JSON layout it must write).
	if [ -x "$ROOT/.gpu/r1go-gpu-bench" ]; then
		step "r1go GPU benchmark" "$log" "$ROOT/.gpu/r1go-gpu-bench" -json "$OUT/r1go_bench.json"
		[ -s "$OUT/r1go_bench.json" ] && r1go=(--r1go "$OUT/r1go_bench.json")
	fi
	step "transformers benchmark" "$log" python3 benchmarks/gpu/transformers_bench.py \
		--json "$OUT/transformers_bench.json" --budget-s "${BENCH_BUDGET_S:-480}" "${r1go[@]}"
}

case $stage in
parity) parity ;;
bench) bench ;;
all)
	parity
	bench
	;;
*)
	echo "usage: run_on_gpu.sh parity|bench|all" >&2
	exit 2
	;;
esac

echo
echo "status:"
printf '  %s\n' "${STATUS[@]}"
if [ -f "$OUT/bench.log" ]; then # the speed table, last
	sed -n '/^ceilings (same run)/,$p' "$OUT/bench.log"
fi
for s in "${STATUS[@]}"; do
	case $s in *FAIL*) exit 1 ;; esac
done
exit 0
