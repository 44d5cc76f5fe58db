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
#   bash benchmarks/gpu/run_on_gpu.sh first    a first call within a 15-minute device
#                                              budget: cuda, e2e, parity, then bench
#                                              with what is left of DEADLINE_S (420)
#   bash benchmarks/gpu/run_on_gpu.sh tc       the tensor-core check: the tensor-core tests, the
#                                              kernel lab's attention, train and decode against
#                                              transformers, ncu, the rest while DEADLINE_S allows
#   bash benchmarks/gpu/run_on_gpu.sh table3   one GRPO step of Agent-R1's Table 3 shape on a
#                                              random 3B-shaped folder (phases, peak memory
#                                              against the plan), then ZeRO-2 on VMM arenas
#   bash benchmarks/gpu/run_on_gpu.sh final    cuda, bench, e2e with device auto, kernel lab
#   bash benchmarks/gpu/run_on_gpu.sh default  the README's `go run ./cmd/train` (the embedded
#                                              default, device auto) on the GPU
#   bash benchmarks/gpu/run_on_gpu.sh recheck  cuda, e2e synchronous and asynchronous (the
#                                              rollout on a second stream), the speed table's
#                                              train and RL rows while DEADLINE_S allows
#   bash benchmarks/gpu/run_on_gpu.sh second cuda, a ZeRO-2 run on VMM arenas, the CPU
#                                              rollout on this host (2 cores and all), bench
#   bash benchmarks/gpu/run_on_gpu.sh tiles    the rollout copy in the tile layout: the tests on
#                                              the tile unit, then .gpu/base's decode and
#                                              rollout and the head's, alternating
#   bash benchmarks/gpu/run_on_gpu.sh cpu      the CPU rollout and DecodeBatch05B on this
#                                              host (.gpu/cpubench, .gpu/model.test, .gpu/cpu.test), then
#                                              transformers' RL step
#   bash benchmarks/gpu/run_on_gpu.sh amx      the AMX tile path on this host's Xeon:
#                                              .gpu/gemm.test's AMX tests, then the bf16
#                                              decode and rollout with R1GO_AMX=0 and 1
#   bash benchmarks/gpu/run_on_gpu.sh amxab    after a change to it: the tests, then the
#                                              bf16 decode and rollout of .gpu/base's
#                                              binaries and the head's, alternating
#   bash benchmarks/gpu/run_on_gpu.sh pages    huge pages: THP settings, the read probe in
#                                              both page sizes, the rollout with and without
#   bash benchmarks/gpu/run_on_gpu.sh stream   the tile tests, the ways of reading the
#                                              weights, the host-work benchmarks, the
#                                              rollout of .gpu/base and the head
#   bash benchmarks/gpu/run_on_gpu.sh streamshape  the weights' stream alone, read by
#                                              AVX loads, tile loads, and tile loads
#                                              with prefetches or loads ahead, then the
#                                              rollout with R1GO_AMX_STREAM=avx and nopf,
#                                              and its KV cache in huge pages (~4 min)
#
# Stages of "first": cuda (package cuda's tests, .gpu/cuda.test), e2e (a
# random-weight Qwen2.5-0.5B folder from .gpu/memstep with the real Qwen
# tokenizer in .gpu/, then three GRPO steps of .gpu/train on the GPU with
# nvidia-smi sampling the memory). Every .gpub/*.tar.* carried (bundle.sh,
# bundle_cuda.sh: the binaries compressed to fit the 64 MiB carry limit) is
# unpacked into .gpu/ first.
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
T0=$SECONDS
DEADLINE_S=${DEADLINE_S:-420}
left() { echo $((DEADLINE_S - (SECONDS - T0))); }
for f in "$ROOT"/.gpub/*.tar.*; do
	[ -f "$f" ] && mkdir -p "$ROOT/.gpu" && tar -xf "$f" -C "$ROOT/.gpu"
done
# One kernel cache for every stage, so that NVRTC compiles each file once.
export R1GO_CUDA_CACHE=${R1GO_CUDA_CACHE:-/tmp/r1go-kernels}

# Package cuda compiles its kernels with NVRTC at run time, or reads them
# from a carried cache (go run ./benchmarks/cuda -precompile .gpu/kernels).
if [ -d "$ROOT/.gpu/kernels" ]; then
	mkdir -p "$R1GO_CUDA_CACHE" && cp "$ROOT"/.gpu/kernels/* "$R1GO_CUDA_CACHE"/ 2>/dev/null
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
	local t0=$SECONDS lim
	lim=$(left)
	if [ "$lim" -lt 10 ]; then
		STATUS+=("$(printf '%-44s %s' "$name" "SKIPPED (deadline)")")
		return
	fi
	timeout -k 5 "$lim" "$@" 2>&1 | tee -a "$log"
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
	if [ "${PARITY_CUDA_TESTS:-1}" = 1 ] && [ -x "$ROOT/.gpu/cuda.test" ]; then # package cuda's own tests
		cudatests
	fi
}

info() {
	local log=$OUT/info.log
	{
		nvidia-smi
		nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
		uname -a
		python3 -c 'import torch, transformers, tokenizers; print("torch", torch.__version__, "transformers", transformers.__version__, "tokenizers", tokenizers.__version__)'
		ldconfig -p | grep -E 'libcuda.so|libcublas.so|libnvrtc.so|libnccl.so'
		echo "R1GO_NVRTC=${R1GO_NVRTC:-} R1GO_CUBLAS=${R1GO_CUBLAS:-}"
	} >"$log" 2>&1
	cat "$log"
}

cudatests() {
	local log=$OUT/cuda.log
	step "cuda package tests" "$log" bash -c "cd '$ROOT/cuda' && '$ROOT/.gpu/cuda.test' -test.v -test.timeout=${CUDA_TEST_TIMEOUT:-170s}"
	grep -E '^(--- FAIL|FAIL|ok|PASS|panic)' "$log" | head -40
}

# tokfiles DIR: a tokenizer into a random-weight folder: the real Qwen one
# when carried in .gpu/, else the repository's Qwen2-layout fixture (3,022
# tokens, whose longer tokenization of the synthetic prompts needs
# rollout.max_prompt_tokens=600: $TOK_ARGS).
tokfiles() {
	if [ -f "$ROOT/.gpu/tokenizer.json" ]; then
		cp "$ROOT"/.gpu/tokenizer.json "$ROOT"/.gpu/tokenizer_config.json "$1"/
		TOK_ARGS=
	else
		cp "$ROOT"/model/tokenizer/testdata/qwen2/{tokenizer.json,tokenizer_config.json,chat_template.jinja} "$1"/
		TOK_ARGS=rollout.max_prompt_tokens=600
	fi
}

# gpumem NAME COMMAND...: a step with nvidia-smi sampling the memory every
# 250 ms, then the peak.
gpumem() {
	local name=$1 log=$2
	shift 2
	nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -lms 250 >/tmp/gpumem.csv 2>&1 &
	local smi=$!
	step "$name" "$log" "$@"
	kill $smi 2>/dev/null
	echo "peak GPU memory (nvidia-smi, MiB): $(awk -F', ' '{gsub(/ MiB/,"",$2); if ($2+0>m) m=$2+0} END {print m}' /tmp/gpumem.csv)" | tee -a "$log"
}

e2e() {
	local log=$OUT/e2e.log dir=/tmp/r1go-qwen2.5-0.5b-random run=/tmp/r1go-e2e${RUN_TAG:+-$RUN_TAG}
	[ -f "$dir/config.json" ] || step "random Qwen2.5-0.5B folder" "$log" "$ROOT/.gpu/memstep" -gen -dir "$dir"
	tokfiles "$dir"
	rm -rf "$run"
	gpumem "GRPO on the GPU (${E2E_STEPS:-3} steps${RUN_TAG:+, $RUN_TAG})" "$log" "$ROOT/.gpu/train" model.path="$dir" sft.steps=0 \
		trainer.device=${E2E_DEVICE:-cuda} trainer.total_training_steps="${E2E_STEPS:-3}" trainer.test_freq=0 trainer.save_freq=0 \
		data.val_size=16 trainer.default_local_dir="$run" "trainer.logger=[console,jsonl]" $TOK_ARGS ${E2E_ARGS:-}
}

# table3: one GRPO step in the shape of Agent-R1's Table 3 run on a
# random-weight Qwen2.5-3B-shaped folder: 128 prompts × 5 samples, 500-token
# turns, a 4,096-token context, the KL loss's reference policy, as many
# KV-cache slots as the plan fits (TABLE3_SLOTS). Random weights call no
# tool, so each trajectory is one 500-token turn. Its phases come from the
# run's metrics.jsonl, its peak memory from nvidia-smi against the plan
# train prints. It stops after the step (trainer.stop_after): no checkpoint of
# 42 GB, no held-out evaluation after it.
table3() {
	local log=$OUT/table3.log dir=/tmp/r1go-qwen2.5-3b-random run=/tmp/r1go-table3
	step "random Qwen2.5-3B folder" "$log" "$ROOT/.gpu/memstep" -gen -config "$ROOT/model/testdata/config_qwen2.5-3b.json" -dir "$dir"
	tokfiles "$dir"
	rm -rf "$run"
	gpumem "GRPO step, Table 3 shape" "$log" "$ROOT/.gpu/train" -config examples/agent-r1/grpo.yaml model.path="$dir" sft.steps=0 \
		trainer.device=cuda trainer.total_training_steps=2 trainer.stop_after=1 trainer.test_freq=0 trainer.save_freq=0 \
		data.train_batch_size=128 data.val_size=8 data.synth_eval=8 rollout.slots=${TABLE3_SLOTS:-500} \
		rollout.max_turn_tokens=500 rollout.max_prompt_tokens=600 rollout.max_response_tokens=3496 model.max_context=4096 \
		actor.optim.lr=1e-6 trainer.default_local_dir="$run" "trainer.logger=[console,jsonl]"
	cp "$run/metrics.jsonl" "$OUT/table3_metrics.jsonl" 2>/dev/null
}

cudalab() { # package cuda's kernels one by one, float32 (benchmarks/cuda), for the profile
	[ -x "$ROOT/.gpu/cudabench" ] || return 0
	step "cuda kernel lab (benchmarks/cuda)" "$OUT/cudalab.log" "$ROOT/.gpu/cudabench" -cpu=false -reps 10
}

# cpustep and cpudecode run .gpu's binaries, or those of BIN_DIR (.gpu/base: a
# commit's before, for an A/B on this machine), named in each step by BIN_TAG.
cpustep() { # the 0.5B rollout on this machine's CPU (benchmarks/cpu, no update, no peer), 2 cores then all
	local bin=${BIN_DIR:-$ROOT/.gpu}/cpubench
	[ -x "$bin" ] || return 0
	local log=$OUT/cpustep.log n
	lscpu >>"$log" 2>&1
	for n in ${CPU_THREADS:-2 $(nproc)}; do
		step "CPU rollout, $n threads${R1GO_AMX:+, R1GO_AMX=$R1GO_AMX}${BIN_TAG:+, $BIN_TAG}" "$log" taskset -c 0-$((n - 1)) "$bin" -sections step -threads "$n" \
			-step_peer=false -step_score=false -step_update=false -step_response_len "${CPU_RESPONSE_LEN:-128}" \
			-step_rollout "${STEP_ROLLOUT:-float32,bfloat16}" ${STEP_ARGS:-}
	done
}

rolloutab() { # the bf16 rollout of the head and of .gpu/base alternating twice (CPU_THREADS), a CPU profile of the head's second ($OUT/rollout_amx.pprof): its split between products, attention and the rest
	step "random Qwen2.5-0.5B folder" "$OUT/cpustep.log" "$ROOT/.gpu/memstep" -gen -dir /tmp/r1go-qwen2.5-0.5b-random
	local rep
	for rep in 1 2; do
		BIN_TAG="head, run $rep" STEP_ROLLOUT=bfloat16 STEP_ARGS="$([ $rep = 2 ] && echo "-cpuprofile $OUT/rollout_amx.pprof")" cpustep
		BIN_DIR=$ROOT/.gpu/base BIN_TAG="base, run $rep" STEP_ROLLOUT=bfloat16 cpustep
	done
}

cpudecode() { # the batch-32 decode kernels alone (model's DecodeBatch05B: float32, bf16 dot products, widening bf16)
	local bin=${BIN_DIR:-$ROOT/.gpu}/model.test
	[ -x "$bin" ] || return 0
	local n
	for n in ${CPU_THREADS:-2 $(nproc)}; do
		step "${DECODE_FILTER:-DecodeBatch05B}, $n threads${R1GO_AMX:+, R1GO_AMX=$R1GO_AMX}${BIN_TAG:+, $BIN_TAG}" "$OUT/cpustep.log" bash -c "cd '$ROOT/model' && taskset -c 0-$((n - 1)) '$bin' \
			-test.run '^\$' -test.bench '${DECODE_FILTER:-DecodeBatch05B}' -test.benchtime ${DECODE_STEPS:-8}x -test.cpu $n ${DECODE_ARGS:-}"
	done
}

amxtests() { # package gemm's bf16 and AMX tests (.gpu/gemm.test): the tile kernel against its Go model, the driver, the whole product against float64
	[ -x "$ROOT/.gpu/gemm.test" ] || return 0
	step "gemm AMX and bf16 tests" "$OUT/amx.log" bash -c "cd '$ROOT/model/cpu/gemm' && R1GO_AMX=1 R1GO_AMX_REQUIRE=1 '$ROOT/.gpu/gemm.test' \
		-test.run 'AMX|DotBF16|CvtBF16|Swapped|PackPairs|Tile' -test.v -test.bench '${AMX_BENCH:-DotBF16$|DotBF16Rows|AMXRun}' -test.benchtime 200x"
}

amxbench() { # amxbench N: BenchmarkDotBF16Rows's batch-16, -32 and -64 rows on N cores, every kernel this CPU has
	[ -x "$ROOT/.gpu/gemm.test" ] || return 0
	step "DotBF16Rows, $1 threads${R1GO_AMX:+, R1GO_AMX=$R1GO_AMX}" "$OUT/amx.log" bash -c "cd '$ROOT/model/cpu/gemm' && taskset -c 0-$(($1 - 1)) '$ROOT/.gpu/gemm.test' \
		-test.run '^\$' -test.bench 'DotBF16Rows/.*/m(16|32|64)/' -test.benchtime 100x -test.cpu $1"
}

tilelayers() { # tilelayers N: BenchmarkTileLayers (a decode step's products as the model runs them, by kind and tasks a thread) on N cores
	[ -x "$ROOT/.gpu/gemm.test" ] || return 0
	step "TileLayers, $1 threads" "$OUT/amx.log" bash -c "cd '$ROOT/model/cpu/gemm' && taskset -c 0-$(($1 - 1)) '$ROOT/.gpu/gemm.test' \
		-test.run '^\$' -test.bench 'TileLayers' -test.benchtime 5x -test.cpu $1"
}

attnbench() { # attnbench N: BenchmarkAttentionDecodeStep05B (a decode step's attention from memory, in cache, and on a bf16 cache) on N cores
	[ -x "$ROOT/.gpu/cpu.test" ] || return 0
	step "AttentionDecodeStep05B, $1 threads" "$OUT/amx.log" bash -c "cd '$ROOT/model/cpu' && taskset -c 0-$(($1 - 1)) '$ROOT/.gpu/cpu.test' \
		-test.run '^\$' -test.bench 'AttentionDecodeStep05B' -test.benchtime 40x -test.count 3 -test.cpu $1"
}

modeltiles() { # package model's rollout-copy tests on the tile unit: the tile layout against rows, bit for bit
	[ -x "$ROOT/.gpu/model.test" ] || return 0
	step "model rollout-copy tests (tile layout)" "$OUT/amx.log" bash -c "cd '$ROOT/model' && R1GO_AMX_REQUIRE=1 '$ROOT/.gpu/model.test' \
		-test.run 'RolloutCopy' -test.v"
}

amxstream() { # amxstream N: BenchmarkDotBF16Stream (a decode step's products from memory) on N cores, every kernel this CPU has
	[ -x "$ROOT/.gpu/gemm.test" ] || return 0
	step "DotBF16Stream, $1 threads" "$OUT/amx.log" bash -c "cd '$ROOT/model/cpu/gemm' && taskset -c 0-$(($1 - 1)) '$ROOT/.gpu/gemm.test' \
		-test.run '^\$' -test.bench 'DotBF16Stream' -test.benchtime 5x -test.cpu $1"
}

modelkernels() { # the decode's host work beside its former code, same run, 2 cores: sampling's groups, the norm, the cached attention, the pool's helpers
	local bin=${BIN_DIR:-$ROOT/.gpu}/model.test
	[ -x "$bin" ] || return 0
	step "SampleAll, 2 threads" "$OUT/cpustep.log" bash -c "cd '$ROOT/model' && taskset -c 0-1 '$bin' \
		-test.run '^\$' -test.bench 'SampleAll' -test.benchtime 300x -test.cpu 2"
	local cbin=${BIN_DIR:-$ROOT/.gpu}/cpu.test
	[ -x "$cbin" ] && step "RMSNormDecode, AttentionCached05B, 2 threads" "$OUT/cpustep.log" bash -c "cd '$ROOT/model/cpu' && taskset -c 0-1 '$cbin' \
		-test.run '^\$' -test.bench 'RMSNormDecode|AttentionCached05B' -test.benchtime 300x -test.cpu 2"
	[ -x "$ROOT/.gpu/gemm.test" ] || return 0
	step "DotBF16Threads, 2 threads" "$OUT/cpustep.log" bash -c "cd '$ROOT/model/cpu/gemm' && taskset -c 0-1 '$ROOT/.gpu/gemm.test' \
		-test.run '^\$' -test.bench 'DotBF16Threads' -test.benchtime 300x -test.cpu 2"
}

corepairs() { # whether two of this VM's vCPUs share a core: the products' stream on 0,1 and on 0 with the last vCPU
	[ -x "$ROOT/.gpu/gemm.test" ] || return 0
	local last=$(($(nproc) - 1)) pair
	for pair in 0,1 "0,$last"; do
		step "DotBF16Stream, vCPUs $pair" "$OUT/amx.log" bash -c "cd '$ROOT/model/cpu/gemm' && taskset -c $pair '$ROOT/.gpu/gemm.test' \
			-test.run '^\$' -test.bench 'DotBF16Stream' -test.benchtime 3x -test.cpu 2"
	done
}

vmm() { # ZeRO-2's VMM gradient arena on real hardware: a world of one, cuMem* chunks given back and mapped again
	R1GO_CUDA_VMM=1 E2E_ARGS="dp.zero=2 ${E2E_ARGS:-}" e2e
}

bench() {
	local log=$OUT/bench.log r1go=() jd=${BENCH_JSON_DIR:-$OUT}
	# r1go's GPU side of the table, when a binary for it was carried
	# (README.md: the JSON layout it must write).
	if [ -x "$ROOT/.gpu/r1go-gpu-bench" ]; then
		step "r1go GPU benchmark" "$log" "$ROOT/.gpu/r1go-gpu-bench" -json "$jd/r1go_bench.json" -sections "${GPUBENCH_SECTIONS:-train,decode,rl}"
		[ -s "$jd/r1go_bench.json" ] && r1go=(--r1go "$jd/r1go_bench.json")
	fi
	local budget=${BENCH_BUDGET_S:-480}
	[ "$budget" -gt "$(($(left) - 20))" ] && budget=$(($(left) - 20))
	step "transformers benchmark" "$log" python3 benchmarks/gpu/transformers_bench.py --sections "${BENCH_SECTIONS:-ceilings,train,decode,rl}" \
		--json "$jd/transformers_bench.json" --budget-s "$budget" "${r1go[@]}"
}

tclab() { # the kernel lab's tensor-core attention: both head configurations, every forward tile shape, both backwards, validated against the CPU
	[ -x "$ROOT/.gpu/cudabench" ] || return 0
	step "tensor-core attention (benchmarks/cuda -attention-tc)" "$OUT/tclab.log" "$ROOT/.gpu/cudabench" -attention-tc -tokens 4096 -reps 20
}

tcncu() { # ncu on the tensor-core attention kernels (Firecracker only), while time remains
	[ -x "$ROOT/.gpu/cudabench" ] && command -v ncu >/dev/null || return 0
	[ "$(uname -r)" = 4.4.0 ] && return 0 # gVisor: no hardware counters
	step "ncu: tensor-core attention kernels" "$OUT/ncu.log" ncu --clock-control none -k 'regex:attention_tc_(fwd|bwd|dq)' -c 8 \
		--section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis_Tables \
		"$ROOT/.gpu/cudabench" -attention-tc -tokens 4096 -reps 1 -tc-validate 0
	grep -E '^  attention_tc|Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|Compute \(SM\) Throughput|L2 Cache Throughput|bank' "$OUT/ncu.log" | head -80
}

case $stage in
tc) # the tensor-core check, in priority order within DEADLINE_S: the tensor-core tests, the kernel lab's attention, training and decode against transformers, ncu, then the RL step and package cuda's other tests
	info
	step "cuda: tensor-core and mixed-precision tests" "$OUT/cuda.log" bash -c "cd '$ROOT/cuda' && '$ROOT/.gpu/cuda.test' -test.run 'TC|BF16|Mixed|LMHead|SwiGLU|RMSNorm|Blas|Decode' -test.v -test.timeout=120s"
	tclab
	# TC_TABLE: the speed table's sections (train,decode); TC_REST=0 stops after ncu.
	GPUBENCH_SECTIONS=${TC_TABLE:-train,decode} BENCH_SECTIONS=ceilings,${TC_TABLE:-train,decode} BENCH_BUDGET_S=${BENCH_BUDGET_S:-240} bench
	tcncu
	if [ "${TC_REST:-1}" = 1 ]; then
		mkdir -p /tmp/rl && BENCH_JSON_DIR=/tmp/rl GPUBENCH_SECTIONS=rl BENCH_SECTIONS=rl bench # its table goes to bench.log ($OUT returns 8 files at most)
		CUDA_TEST_TIMEOUT=$(($(left) - 10))s cudatests
	fi
	;;
parity) parity ;;
bench) bench ;;
all)
	parity
	bench
	;;
again) # after a fix: package cuda's tests and the end-to-end run
	info
	cudatests
	e2e
	;;
first)
	export PARITY_CUDA_TESTS=0
	info
	cudatests
	e2e
	parity
	bench
	;;
final) # the speed table with r1go's column, auto choosing the GPU, the kernel lab
	info
	cudatests
	bench
	E2E_DEVICE=auto e2e
	cudalab
	;;
second) # the changes since the first GPU run: VMM, the CPU rollout on this host, the speed table again
	info
	cudatests
	vmm
	cpustep
	bench
	;;
amx) # the 0.5B rollout on this host's Xeon: the AMX tile path (gemm's tests, then the bf16 decode with AMX off and on)
	info >/dev/null
	lscpu >>"$OUT/amx.log" 2>&1
	amxtests
	for a in 0 1; do
		CPU_THREADS=${CPU_THREADS:-2} R1GO_AMX=$a DECODE_FILTER='DecodeBatch05B/bf16-copy' cpudecode
	done
	step "random Qwen2.5-0.5B folder" "$OUT/cpustep.log" "$ROOT/.gpu/memstep" -gen -dir /tmp/r1go-qwen2.5-0.5b-random
	for a in 0 1; do
		CPU_THREADS=${CPU_THREADS:-2} R1GO_AMX=$a STEP_ROLLOUT=bfloat16 cpustep
	done
	for a in 0 1; do # the products alone on 2 cores: vector kernels, then tiles
		R1GO_AMX=$a amxbench 2
	done
	for a in 0 1; do # every core, while time is left
		CPU_THREADS=$(nproc) R1GO_AMX=$a DECODE_FILTER='DecodeBatch05B/bf16-copy' cpudecode
	done
	;;
amxab) # after a change to the AMX path: its tests, then .gpu/base (R1GO_AMX=1) and the head (AMX by default) alternating
	info >/dev/null
	lscpu >>"$OUT/amx.log" 2>&1
	AMX_BENCH='AMXRun' amxtests
	amxstream 2
	corepairs
	modelkernels
	export CPU_THREADS=2
	for rep in 1 2 3; do
		R1GO_AMX=1 BIN_DIR=$ROOT/.gpu/base BIN_TAG="base, run $rep" DECODE_FILTER='DecodeBatch05B/bf16-copy' cpudecode
		BIN_TAG="head, run $rep" DECODE_FILTER='DecodeBatch05B/bf16-copy' cpudecode
	done
	step "random Qwen2.5-0.5B folder" "$OUT/cpustep.log" "$ROOT/.gpu/memstep" -gen -dir /tmp/r1go-qwen2.5-0.5b-random
	BIN_TAG=head STEP_ROLLOUT=bfloat16 cpustep
	R1GO_AMX=1 BIN_DIR=$ROOT/.gpu/base BIN_TAG=base STEP_ROLLOUT=bfloat16 cpustep
	amxstream "$(nproc)"
	CPU_THREADS=$(nproc) BIN_TAG=head DECODE_FILTER='DecodeBatch05B/bf16-copy' cpudecode
	BIN_TAG="head, profile" DECODE_FILTER='DecodeBatch05B/bf16-copy' DECODE_STEPS=16 DECODE_ARGS="-test.cpuprofile $OUT/decode_amx.pprof" cpudecode
	;;
tiles) # the rollout copy's matrices in the tile layout: the tests on the tile unit, then .gpu/base and the head alternating
	info >/dev/null
	lscpu >>"$OUT/amx.log" 2>&1
	AMX_BENCH='AMXRun' amxtests
	modeltiles
	tilelayers 2
	amxstream 2
	export CPU_THREADS=2
	for rep in 1 2 3; do
		BIN_DIR=$ROOT/.gpu/base BIN_TAG="base, run $rep" DECODE_FILTER='DecodeBatch05B/bf16-copy' cpudecode
		BIN_TAG="head, run $rep" DECODE_FILTER='DecodeBatch05B/bf16-copy' cpudecode
	done
	rolloutab
	tilelayers "$(nproc)"
	CPU_THREADS=$(nproc) BIN_TAG=head DECODE_FILTER='DecodeBatch05B/bf16-copy' cpudecode
	BIN_TAG="head, profile" DECODE_FILTER='DecodeBatch05B/bf16-copy' DECODE_STEPS=16 DECODE_ARGS="-test.cpuprofile $OUT/decode_amx.pprof" cpudecode
	;;
attn) # the decode's host work (prefetching attention kernels, the rollout copy's bf16 KV cache, the vector norm): tests and benchmarks, then the rollout, .gpu/base and the head alternating
	info >/dev/null
	lscpu >>"$OUT/amx.log" 2>&1
	[ -x "$ROOT/.gpu/model.test" ] && step "model rollout-copy and grouped tests" "$OUT/amx.log" bash -c "cd '$ROOT/model' && R1GO_AMX_REQUIRE=1 \
		'$ROOT/.gpu/model.test' -test.run 'RolloutCopy|GroupedMatches' -test.v"
	[ -x "$ROOT/.gpu/cpu.test" ] && step "CPU device attention and norm tests" "$OUT/amx.log" bash -c "cd '$ROOT/model/cpu' && R1GO_AMX_REQUIRE=1 \
		'$ROOT/.gpu/cpu.test' -test.run 'Attention|FMA32|RMSNorm' -test.v"
	attnbench 2
	[ -x "$ROOT/.gpu/cpu.test" ] && step "RMSNormDecode, 1 thread" "$OUT/amx.log" bash -c "cd '$ROOT/model/cpu' && taskset -c 0 \
		'$ROOT/.gpu/cpu.test' -test.run '^\$' -test.bench 'RMSNormDecode' -test.benchtime 3000x -test.count 3"
	export CPU_THREADS=2
	rolloutab
	attnbench "$(nproc)"
	;;
pages) # the rollout copy's weights in huge pages: the THP settings, package pages' tests, the read probe in 4 KiB and huge pages, then the bf16 rollout with huge pages (R1GO_HUGEPAGES=1) and without alternating, the decode's wall time split by operation in each
	info >/dev/null
	lscpu >>"$OUT/amx.log" 2>&1
	step "THP settings" "$OUT/amx.log" bash -c 'grep -H . /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag; grep -i huge /proc/meminfo'
	[ -x "$ROOT/.gpu/pages.test" ] && step "pages tests" "$OUT/amx.log" bash -c "cd '$ROOT/internal/pages' && '$ROOT/.gpu/pages.test' -test.v"
	[ -x "$ROOT/.gpu/probe.test" ] && step "ReadPages, 2 threads" "$OUT/amx.log" bash -c "cd '$ROOT/benchmarks/internal/probe' && taskset -c 0-1 \
		'$ROOT/.gpu/probe.test' -test.run '^\$' -test.bench 'ReadPages' -test.benchtime 3x -test.cpu 2"
	export CPU_THREADS=2
	step "random Qwen2.5-0.5B folder" "$OUT/cpustep.log" "$ROOT/.gpu/memstep" -gen -dir /tmp/r1go-qwen2.5-0.5b-random
	for rep in 1 2 3; do
		R1GO_HUGEPAGES=1 BIN_TAG="huge pages, run $rep" STEP_ROLLOUT=bfloat16 STEP_ARGS="$([ $rep = 3 ] && echo "-cpuprofile $OUT/rollout_amx.pprof")" cpustep
		R1GO_HUGEPAGES=0 BIN_TAG="4 KiB pages, run $rep" STEP_ROLLOUT=bfloat16 cpustep
	done
	[ -x "$ROOT/.gpu/probe.test" ] && step "ReadPages, $(nproc) threads" "$OUT/amx.log" bash -c "cd '$ROOT/benchmarks/internal/probe' && \
		'$ROOT/.gpu/probe.test' -test.run '^\$' -test.bench 'ReadPages' -test.benchtime 3x"
	;;
stream) # the tests on the tile unit, the ways of prefetching the weights (TileLayers), then the bf16 rollout of .gpu/base and the head alternating, and the head with the fastest way (R1GO_AMX_STREAM) against its default
	info >/dev/null
	lscpu >>"$OUT/amx.log" 2>&1
	[ -x "$ROOT/.gpu/gemm.test" ] && step "gemm tile tests" "$OUT/amx.log" bash -c "cd '$ROOT/model/cpu/gemm' && R1GO_AMX_REQUIRE=1 \
		'$ROOT/.gpu/gemm.test' -test.run 'TileBF16|AMXRunKernels|SgemmAMX' -test.v" 
	[ -x "$ROOT/.gpu/model.test" ] && step "model host-work tests" "$OUT/amx.log" bash -c "cd '$ROOT/model' && R1GO_AMX_REQUIRE=1 \
		'$ROOT/.gpu/model.test' -test.run 'RolloutCopy|SampleAll' -test.v"
	[ -x "$ROOT/.gpu/cpu.test" ] && step "CPU device host-work tests" "$OUT/amx.log" bash -c "cd '$ROOT/model/cpu' && R1GO_AMX_REQUIRE=1 \
		'$ROOT/.gpu/cpu.test' -test.run 'SwiGLU|Sample32|BlockSums32|RoPE|AddVector|TimeOps' -test.v"
	tilelayers 2
	tilelayers 2
	# The fastest way of prefetching in the two passes, if 3 % above the default's.
	best=$(grep -h '^BenchmarkTileLayers' "$OUT/amx.log" | awk '{for (i = 2; i <= NF; i++) if ($i ~ /^t2(-nopf)?-GB\/s$/) { v = $i; sub(/-GB\/s$/, "", v); s[v] += $(i-1); n[v]++ } }
		END { b = "t2"; for (v in s) if (s[v] / n[v] > 1.03 * s["t2"] / n["t2"] && s[v] / n[v] > s[b] / n[b]) b = v; sub(/^t2-?/, "", b); print b }')
	echo "fastest way of prefetching: '${best:-default}'" | tee -a "$OUT/amx.log"
	[ -x "$ROOT/.gpu/cpu.test" ] && step "DecodeHostOps, 2 threads" "$OUT/amx.log" bash -c "cd '$ROOT/model/cpu' && taskset -c 0-1 \
		'$ROOT/.gpu/cpu.test' -test.run '^\$' -test.bench 'DecodeHostOps' -test.benchtime 200x -test.cpu 2"
	[ -x "$ROOT/.gpu/model.test" ] && step "SampleAll, 2 threads" "$OUT/amx.log" bash -c "cd '$ROOT/model' && taskset -c 0-1 \
		'$ROOT/.gpu/model.test' -test.run '^\$' -test.bench 'SampleAll' -test.benchtime 200x -test.cpu 2"
	export CPU_THREADS=2
	step "random Qwen2.5-0.5B folder" "$OUT/cpustep.log" "$ROOT/.gpu/memstep" -gen -dir /tmp/r1go-qwen2.5-0.5b-random
	for rep in 1 2; do
		BIN_TAG="head, run $rep" STEP_ROLLOUT=bfloat16 STEP_ARGS="$([ $rep = 2 ] && echo "-cpuprofile $OUT/rollout_amx.pprof")" cpustep
		BIN_DIR=$ROOT/.gpu/base BIN_TAG="base, run $rep" STEP_ROLLOUT=bfloat16 cpustep
	done
	if [ -n "$best" ]; then
		for rep in 1 2; do
			R1GO_AMX_STREAM=$best BIN_TAG="head, R1GO_AMX_STREAM=$best, run $rep" STEP_ROLLOUT=bfloat16 cpustep
			BIN_TAG="head, default, run $((rep + 2))" STEP_ROLLOUT=bfloat16 cpustep
		done
	fi
	;;
streamshape) # why the products read the weights slower than the probe: the stream kernels' and run kernels' tests on the tile unit, then BenchmarkAMXStream (AVX loads, tile loads alone, with the run kernel's prefetch, with AVX loads ahead) and TileLayers (t2-avx: the run kernel reading ahead with AVX loads) on 2 cores, AMXStream on all, then the bf16 rollout's decode with the default, avx and nopf taking turns in one process, and with its KV cache in huge and in small pages
	info >/dev/null
	lscpu >>"$OUT/amx.log" 2>&1
	step "gemm stream tests" "$OUT/amx.log" bash -c "cd '$ROOT/model/cpu/gemm' && R1GO_AMX_REQUIRE=1 '$ROOT/.gpu/gemm.test' -test.run 'AMXStreamKernels|AMXRunKernels|TileBF16' -test.v"
	for rep in 1 2 3; do
		step "AMXStream, 2 threads, turn $rep" "$OUT/amx.log" bash -c "cd '$ROOT/model/cpu/gemm' && taskset -c 0-1 '$ROOT/.gpu/gemm.test' \
			-test.run '^\$' -test.bench 'AMXStream' -test.benchtime 3x -test.cpu 2"
	done
	tilelayers 2
	step "AMXStream, $(nproc) threads" "$OUT/amx.log" bash -c "cd '$ROOT/model/cpu/gemm' && '$ROOT/.gpu/gemm.test' \
		-test.run '^\$' -test.bench 'AMXStream' -test.benchtime 3x"
	export CPU_THREADS=2
	step "random Qwen2.5-0.5B folder" "$OUT/cpustep.log" "$ROOT/.gpu/memstep" -gen -dir /tmp/r1go-qwen2.5-0.5b-random
	# The default, avx and nopf taking turns three times in one process
	# (-step_streams), then the KV cache in huge and in small pages (-step_kvpages).
	BIN_TAG="ways of reading in turns" STEP_ROLLOUT=bfloat16 STEP_ARGS="-step_streams ,avx,nopf -step_kvpages" cpustep
	;;
cpu) # the 0.5B rollout on this host's CPU after the decode changes, then the transformers RL step
	info >/dev/null
	step "random Qwen2.5-0.5B folder" "$OUT/cpustep.log" "$ROOT/.gpu/memstep" -gen -dir /tmp/r1go-qwen2.5-0.5b-random
	cpustep
	cpudecode
	step "transformers RL step" "$OUT/bench.log" python3 benchmarks/gpu/transformers_bench.py --sections rl \
		--json "$OUT/transformers_rl.json" --budget-s "$(($(left) - 15))"
	;;
recheck) # after device changes checked only on the emulator: the suite, GRPO synchronous and asynchronous (the rollout on a second stream), then the speed table while DEADLINE_S allows
	info
	CUDA_TEST_TIMEOUT=${CUDA_TEST_TIMEOUT:-150s} cudatests
	e2e
	E2E_STEPS=4 E2E_ARGS="trainer.async=true rollout.max_staleness=1 actor.policy_loss=decoupled" RUN_TAG=async e2e
	cp /tmp/r1go-e2e-async/metrics.jsonl "$OUT/async_metrics.jsonl" 2>/dev/null
	GPUBENCH_SECTIONS=${RECHECK_TABLE:-train,rl} BENCH_SECTIONS=ceilings,${RECHECK_TABLE:-train,rl} BENCH_BUDGET_S=${BENCH_BUDGET_S:-200} bench
	;;
default) # the README's first command on a GPU box: the embedded default (SFT warm start, then GRPO) with the device left to auto
	info >/dev/null
	rm -rf /tmp/r1go-default
	gpumem "the embedded default, trainer.device=auto" "$OUT/default.log" "$ROOT/.gpu/train" trainer.default_local_dir=/tmp/r1go-default "trainer.logger=[console,jsonl]"
	cp /tmp/r1go-default/metrics.jsonl "$OUT/default_metrics.jsonl" 2>/dev/null
	;;
cuda) cudatests ;;
e2e) e2e ;;
table3) # the Table 3 step on a 3B-shaped folder, then ZeRO-2 on VMM arenas
	info
	table3
	vmm
	;;
*)
	echo "usage: run_on_gpu.sh tc|recheck|default|table3|parity|bench|all|first|again|final|second|cpu|amx|amxab|tiles|attn|pages|stream|streamshape|cuda|e2e" >&2
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
