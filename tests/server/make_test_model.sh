#!/bin/bash
# Builds the server tests' model folder: a tiny random MiniMax-M2 checkpoint whose vocabulary is a
# small byte-level BPE tokenizer trained here (600 tokens + 7 MiniMax specials = 607 ids), with
# the MiniMax-M2 chat template.
# Usage: make_test_model.sh OUT_DIR SOURCE_DIR SHARED_DATA_DIR
set -euo pipefail
out=$1 src=$2 data=$3
rm -rf "$out" && mkdir -p "$out"
node "$src/tools/tokenizer/make_bpe_tokenizer.js" --out "$out/tok" --vocab 600 \
  --template "$data/chat_templates/minimax-m2.jinja" "$data/gsm8k/train.jsonl"
/usr/bin/python3 "$src/tools/gen_checkpoint.py" --arch minimax_m2 --out "$out/model" --vocab 607 \
  --bos 600 --eos 602 --max-pos 4096 --seed 3
cp "$out/tok/tokenizer.json" "$out/tok/tokenizer_config.json" "$out/model/"
