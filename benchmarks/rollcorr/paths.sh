#!/bin/sh
# The mismatch of each CPU sampling path against the trainer on the same
# weights (benchmarks/rollout-correction.md), from the repository root:
#   benchmarks/rollcorr/paths.sh [0.5B folder]
# 1. rl.MismatchMetrics of random-prompt decodes (go run ./benchmarks/rollcorr)
#    on the 0.5B-shaped random folder and on the committed warm start of the
#    embedded default, float32 and bf16 samplers, at each CPU tier;
# 2. the trainer's own per-step figures over two GRPO steps of the default
#    from its warm start (real rollouts in the environment), per dtype and tier.
set -e
big=${1:-/tmp/r1go-qwen2.5-0.5b-random}
[ -f "$big/model.safetensors" ] || go run ./benchmarks/cpu/memstep -gen -dir "$big"
out=${TMPDIR:-/tmp}/rollcorr-paths
mkdir -p "$out"
go build -o "$out/rollcorr" ./benchmarks/rollcorr
go build -o "$out/train" ./cmd/train
echo "| model | sampler | tier | mean abs Δp | max abs Δp | std abs Δp | max abs Δlog p | k1 KL | k3 KL | PPL ratio |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for m in cmd/train/testdata/warmstart "$big"; do
	for tier in avx512 avx2 generic; do
		for d in float32 bfloat16; do
			if [ "$m" = "$big" ]; then size="-seqs 4 -prompt 16 -tokens 32"; else size="-seqs 16 -prompt 32 -tokens 96"; fi
			# shellcheck disable=SC2086
			R1GO_CPU=$tier "$out/rollcorr" -model "$m" -dtype $d $size | grep '^|'
		done
	done
done
echo
echo "| trainer run | tier | step | rollout_probs_diff_mean | _max | rollout_corr/kl | k3_kl | ppl_ratio | turn_first k3 | turn_last k3 |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for tier in avx512 avx2 generic; do
	for d in float32 bfloat16; do
		dir="$out/train-$d-$tier"
		rm -rf "$dir"
		R1GO_CPU=$tier "$out/train" model.path=cmd/train/testdata/warmstart sft.steps=0 trainer.total_training_steps=2 \
			trainer.test_freq=0 trainer.save_freq=0 data.synth_eval=8 data.val_size=4 trainer.logger=[jsonl] \
			rollout.dtype=$d trainer.default_local_dir="$dir" >"$dir.log" 2>&1
		python3 - "$dir/metrics.jsonl" "$d" "$tier" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    d = r.get("data", r)
    if "rollout_corr/kl" not in d:
        continue
    g = lambda k: d.get(k, float("nan"))
    print("| %s | %s | %d | %.3g | %.3g | %.3g | %.3g | %.6f | %.3g | %.3g |" % (sys.argv[2], sys.argv[3], int(g("training/global_step")),
          g("training/rollout_probs_diff_mean"), g("training/rollout_probs_diff_max"), g("rollout_corr/kl"), g("rollout_corr/k3_kl"),
          g("rollout_corr/ppl_ratio"), g("rollout_corr/turn_first/k3_kl"), g("rollout_corr/turn_last/k3_kl")))
PY
	done
done
