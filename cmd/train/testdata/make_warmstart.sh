#!/bin/sh
# Writes testdata/warmstart: the warm-started policy of the embedded default
# run (DefaultConfig's hasty-teacher SFT on the default synthetic world),
# which TestRLRaisesHeldOutEM trains with GRPO. It is the run folder's sft/
# without its eval.json. Takes about 8 minutes on 2 cores.
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go run . trainer.total_training_steps=0 trainer.default_local_dir="$tmp" 'trainer.logger=[console]'
rm -rf testdata/warmstart
mkdir -p testdata/warmstart
cp "$tmp"/sft/config.json "$tmp"/sft/generation_config.json "$tmp"/sft/model.safetensors \
	"$tmp"/sft/tokenizer.json "$tmp"/sft/tokenizer_config.json "$tmp"/sft/chat_template.jinja testdata/warmstart/
