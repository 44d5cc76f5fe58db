#!/bin/sh
# Held-out EM of the embedded default run with rollout correction off, TIS
# on and bypass mode on, three rollout seeds each (benchmarks/rollout-correction.md).
# Usage: benchmarks/rollcorr/em.sh [outdir] [seeds...]   (from the repository root)
# Each run is `go run ./cmd/train` with one mode's keys and the committed
# warm start's shorter SFT (400 steps at a constant lr, which the page's
# figures were made with): about 6-8 minutes on a 2-core machine, more
# than half of it the supervised warm start, which is the same in every run. WARM=DIR (a finished run's DIR/sft, the
# warm-started policy it saved in float32) starts each run from it with
# sft.steps=0 instead; the held-out EM "after SFT" is then DIR's policy's.
# EXTRA="key=value ..." is added to every run (the bf16 sweep:
# EXTRA=rollout.dtype=bfloat16). The runs go one after another, seed-major,
# so a partial sweep still has every mode. Summarise with
#   go run ./benchmarks/rollcorr -em outdir
set -e
out=${1:-/tmp/rollcorr-em}
shift 2>/dev/null || true
seeds=${*:-1 2 3}
mkdir -p "$out"
go build -o "$out/train" ./cmd/train
for s in $seeds; do
	for mode in off tis bypass; do
		case $mode in
		off) keys="" ;;
		tis) keys="algorithm.rollout_correction.rollout_is=token algorithm.rollout_correction.rollout_is_threshold=2" ;;
		bypass) keys="algorithm.rollout_correction.bypass_mode=true" ;;
		esac
		dir="$out/$mode-s$s"
		[ -f "$dir/done" ] && continue
		rm -rf "$dir"
		start=$(date +%s)
		# shellcheck disable=SC2086
		warm="sft.steps=400 sft.optim.schedule=constant"
		[ -n "$WARM" ] && warm="model.path=$WARM sft.steps=0"
		# shellcheck disable=SC2086
		"$out/train" $warm rollout.seed=$s trainer.default_local_dir="$dir" trainer.logger=[jsonl] $keys $EXTRA >"$out/$mode-s$s.log" 2>&1
		echo "$(($(date +%s) - start))" >"$dir/done"
	done
done
