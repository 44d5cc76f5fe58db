#!/bin/sh
# Regenerates the golden files with @huggingface/transformers (npm).
# onnxruntime's install script downloads binaries the tokenizer never uses,
# so scripts are skipped.
set -e
cd "$(dirname "$0")"
npm ci --ignore-scripts --no-audit --no-fund
node gen.mjs
