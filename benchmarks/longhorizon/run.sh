#!/bin/sh
# Runs the long-horizon table of benchmarks/longhorizon.md: GRPO on the
# embedded synthetic world from the committed warm start, in a window of
# 400 tokens that holds a 2-hop question's whole history (about 354 tokens
# with the gold turns) but not a 3-hop's (429) or a 4-hop's (503). Each
# mode trains 30 steps and is evaluated on the 200 held-out questions.
#
#   whole: rollout.trajectory=whole, the history cut at the window
#   window: rollout.trajectory=step, env.context=window, env.context_turns=1
#   drop: rollout.trajectory=step, env.context=drop_observations, env.context_turns=1
#   window-own, drop-own: window and drop from a warm start of their own,
#     the committed warm start's hasty-teacher SFT (400 steps at a constant
#     lr, pinned in $short) made once in step mode with the same
#     context policy (OUT/warm-MODE/sft), so that the demonstrations are
#     the contexts RL trains on
#   whole-gold, window-gold: whole and window from a warm start on the gold
#     demonstrations (sft.early_answer=0) made once in the mode itself: in
#     whole mode a 3- or 4-hop demonstration is cut at the window, in step
#     mode every turn's context fits
#
# usage: benchmarks/longhorizon/run.sh OUT MODE SEED...   (from the repository root)
# A run whose eval.json exists is skipped; render with
#   go run ./benchmarks/longhorizon -out OUT
set -eu
out=$1
mode=$2
shift 2
[ -x "$out/train" ] || go build -o "$out/train" ./cmd/train # one binary for every run of OUT
window="model.max_context=400 rollout.max_prompt_tokens=224 trainer.logger=[jsonl] trainer.overwrite=true"
common="model.path=cmd/train/testdata/warmstart sft.steps=0 $window"
# The warm starts of their own are the committed warm start's SFT
# (make_warmstart.sh), not the embedded default's longer one.
short="sft.steps=400 sft.optim.schedule=constant"
case $mode in
whole | whole-gold) args="rollout.max_response_tokens=176" ;;
window | window-own | window-gold) args="rollout.trajectory=step env.context=window env.context_turns=1" ;;
drop | drop-own) args="rollout.trajectory=step env.context=drop_observations env.context_turns=1" ;;
*) echo "unknown mode $mode" >&2; exit 2 ;;
esac
teacher=""
case $mode in
*-own) warm="$out/warm-${mode%-own}" ;;
*-gold) warm="$out/warm-$mode" teacher="sft.early_answer=0" ;;
*) warm="" ;;
esac
if [ -n "$warm" ]; then
	if [ ! -f "$warm/sft/model.safetensors" ]; then
		# shellcheck disable=SC2086
		"$out/train" $window $args $short $teacher trainer.total_training_steps=0 trainer.default_local_dir="$warm" >"$warm.log" 2>&1
		echo "go run ./cmd/train $window $args $short $teacher trainer.total_training_steps=0 trainer.default_local_dir=$warm" >"$warm/command"
	fi
	common="model.path=$warm/sft sft.steps=0 $window"
fi
for seed in "$@"; do
	dir="$out/$mode-s$seed"
	[ -f "$dir/eval.json" ] && continue
	start=$(date +%s)
	# shellcheck disable=SC2086
	"$out/train" $common $args data.seed="$seed" rollout.seed="$seed" trainer.default_local_dir="$dir" >"$out/$mode-s$seed.log" 2>&1
	echo "$(($(date +%s) - start))" >"$dir/wall_s"
	echo "go run ./cmd/train $common $args data.seed=$seed rollout.seed=$seed trainer.default_local_dir=$dir" >"$dir/command"
done
