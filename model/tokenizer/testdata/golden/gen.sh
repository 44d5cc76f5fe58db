#!/bin/sh
# Regenerates the golden files: gen.mjs with @huggingface/transformers
# (JavaScript), then gen_rust.mjs with the Rust tokenizers library through
# its Node.js binding (npm "tokenizers", prebuilt). onnxruntime's install
# script downloads binaries the tokenizer never uses, so scripts are
# skipped. Run ../splits.py (Python regex) first when the strings change.
set -e
cd "$(dirname "$0")"
npm ci --ignore-scripts --no-audit --no-fund
node gen.mjs
node gen_rust.mjs
