#!/bin/sh
# Synchronous against asynchronous training of the embedded default run on
# this machine, with a slow search tool (env.slow_fraction of the queries
# take env.slow_delay more) and without it (benchmarks/async.md).
# Usage: benchmarks/async/bench.sh [outdir] [seeds...]   (from the repository root)
# WARM=DIR starts every run from a saved warm start (a finished run's
# DIR/sft) with sft.steps=0: the warm start is the same in every run and
# not what is compared. Without it each run makes its own with the
# committed warm start's SFT (400 steps at a constant lr, which the page's
# figures were made with). TOOL="slow" or "fast" or "slow fast" (default
# "slow") chooses the sweeps; ASYNC="key=value ..." replaces the
# asynchronous runs' keys. NP=2 runs both modes as 2 MPI ranks instead
# (mpirun; the modes are named dp2-sync and dp2-async): synchronous data
# parallel, against one trainer rank and one rollout rank
# (dp.rollout_ranks=1). The runs go one after another (each one alone
# on the machine: they are timed), seed-major. Summarise with
#   go run ./benchmarks/async outdir
set -e
out=${1:-/tmp/async-bench}
shift 2>/dev/null || true
seeds=${*:-1 2 3}
mkdir -p "$out"
go build -o "$out/train" ./cmd/train
async=${ASYNC:-"trainer.async=true rollout.max_staleness=1 actor.policy_loss=decoupled"}
launch="" prefix=""
if [ -n "$NP" ]; then
	launch="mpirun --allow-run-as-root -np $NP" prefix="dp$NP-"
	[ -n "$ASYNC" ] || async="$async dp.rollout_ranks=1"
fi
warm="sft.steps=400 sft.optim.schedule=constant"
[ -n "$WARM" ] && warm="model.path=$WARM sft.steps=0"
for tool in ${TOOL:-slow}; do
	slow=""
	[ "$tool" = slow ] && slow="env.slow_fraction=0.1 env.slow_delay=2s"
	for s in $seeds; do
		for mode in sync async; do
			keys=""
			[ "$mode" = async ] && keys=$async
			dir="$out/$tool-$prefix$mode-s$s"
			[ -f "$dir/done" ] && continue
			rm -rf "$dir"
			start=$(date +%s)
			# Continuous batching in both modes (rollout.deterministic would
			# stop every forward step for each slow call); validation every
			# 5 steps on the 50 validation questions gives the EM curve.
			# shellcheck disable=SC2086
			$launch "$out/train" $warm rollout.seed="$s" rollout.deterministic=false trainer.test_freq=5 \
				trainer.default_local_dir="$dir" trainer.logger=[jsonl] $slow $keys >"$dir.log" 2>&1
			echo "$(($(date +%s) - start))" >"$dir/done"
		done
	done
done
