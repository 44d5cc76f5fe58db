#!/bin/bash
# The CUDA sampling paths against the trainer (benchmarks/rollout-correction.md),
# on a GPU machine with no Go: build here, carry .gpu/, run there.
#   here:  go build -ldflags='-s -w' -o .gpu/rollcorr ./benchmarks/rollcorr
#          go build -ldflags='-s -w' -o .gpu/train ./cmd/train
#          gzip -9 .gpu/rollcorr .gpu/train   (the carried files must stay under 64 MiB)
#   there: bash benchmarks/rollcorr/gpu.sh [outdir]
out=${1:-${OUT:-/tmp}}
mkdir -p "$out"
for b in rollcorr train; do
	[ -f .gpu/$b.gz ] && { gunzip -c .gpu/$b.gz >/tmp/$b && chmod +x /tmp/$b; }
	[ -x .gpu/$b ] && cp .gpu/$b /tmp/$b
done
for d in float32 mixed bfloat16; do
	/tmp/rollcorr -device cuda -model cmd/train/testdata/warmstart -dtype $d -seqs 16 -prompt 32 -tokens 96
	/tmp/rollcorr -device cuda -model random-0.5b -dtype $d -seqs 8 -prompt 32 -tokens 64
done 2>&1 | tee "$out/bench.txt"
for d in float32 bfloat16; do
	dir=/tmp/rollcorr-gpu-$d
	rm -rf "$dir"
	timeout 150 /tmp/train model.path=cmd/train/testdata/warmstart sft.steps=0 trainer.total_training_steps=2 \
		trainer.test_freq=0 trainer.save_freq=0 data.synth_eval=8 data.val_size=4 trainer.logger=[jsonl] \
		trainer.device=cuda rollout.dtype=$d trainer.default_local_dir="$dir" >"$out/train-$d.log" 2>&1
	cp "$dir/metrics.jsonl" "$out/train-$d.metrics.jsonl" 2>/dev/null
	tail -3 "$out/train-$d.log"
done
