#!/bin/sh
# Writes testdata/warmstart: a short warm start of the embedded default run
# (DefaultConfig's hasty-teacher SFT on the default synthetic world, but 400
# steps at a constant lr where the default takes 800 with a cosine decay),
# which TestRLRaisesHeldOutEM and the other RL tests and benchmarks train.
# Its names are copied less exactly than the default's, which leaves RL
# more to gain. It is the run folder's sft/ without its eval.json. Takes
# about 4 minutes on 2 idle cores.
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go run . sft.steps=400 sft.optim.schedule=constant trainer.total_training_steps=0 trainer.default_local_dir="$tmp" 'trainer.logger=[console]'
rm -rf testdata/warmstart
mkdir -p testdata/warmstart
cp "$tmp"/sft/config.json "$tmp"/sft/generation_config.json "$tmp"/sft/model.safetensors \
	"$tmp"/sft/tokenizer.json "$tmp"/sft/tokenizer_config.json "$tmp"/sft/chat_template.jinja testdata/warmstart/
