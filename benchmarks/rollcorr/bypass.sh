#!/bin/sh
# The step time bypass mode saves (benchmarks/rollout-correction.md), from
# the repository root: GRPO steps of the default from its warm start with
# two mini-batches per step (so pi_old is recomputed before the update),
# without and with algorithm.rollout_correction.bypass_mode, at the best
# CPU tier; prints each run's mean timing_s figures over steps 2..N.
#   benchmarks/rollcorr/bypass.sh [steps]
set -e
steps=${1:-4}
out=${TMPDIR:-/tmp}/rollcorr-bypass
mkdir -p "$out"
go build -o "$out/train" ./cmd/train
echo "| run | steps | timing_s/step | timing_s/old_log_prob | timing_s/gen | timing_s/update_actor | rollout_corr/k3_kl |"
echo "|---|---|---|---|---|---|---|"
for mode in recompute bypass; do
	dir="$out/$mode"
	rm -rf "$dir"
	keys=""
	[ $mode = bypass ] && keys="algorithm.rollout_correction.bypass_mode=true"
	# shellcheck disable=SC2086
	"$out/train" model.path=cmd/train/testdata/warmstart sft.steps=0 trainer.total_training_steps=$steps \
		trainer.test_freq=0 trainer.save_freq=0 data.synth_eval=8 data.val_size=4 trainer.logger=[jsonl] \
		actor.ppo_mini_batch_size=32 trainer.default_local_dir="$dir" $keys >"$dir.log" 2>&1
	python3 - "$dir/metrics.jsonl" $mode <<'PY'
import json, sys
rs = [json.loads(l)["data"] for l in open(sys.argv[1]) if l.strip()]
rs = [r for r in rs if "timing_s/step" in r][1:]  # the first step warms caches
m = lambda k: sum(r.get(k, 0.0) for r in rs) / len(rs)
print("| %s | %d | %.2f | %.2f | %.2f | %.2f | %.3g |" % (sys.argv[2], len(rs), m("timing_s/step"), m("timing_s/old_log_prob"),
      m("timing_s/gen"), m("timing_s/update_actor"), m("rollout_corr/k3_kl")))
PY
done
