#!/bin/sh
# Generates the real-shape 2-layer MiniMax-M2 bench checkpoint (MiniMax-M2 layer shapes, 32 experts
# instead of 256, vocab 8192): about 2.1 GB of bf16 in OUTDIR. Extra arguments go to gen_checkpoint.py
# (e.g. --shards 2, --seed 1). The routing bias is small (--bias-std 0.001): with the generator's
# default 0.1 the bias alone decides the random router's top-8, and 512 tokens reach only ~115 of
# 256 experts (and unevenly 32), which makes prefill look faster than a trained router would.
set -eu
if [ $# -lt 1 ]; then
  echo "usage: $0 OUTDIR [gen_checkpoint.py options]" >&2
  exit 2
fi
out=$1
shift
exec /usr/bin/python3 "$(dirname "$0")/gen_checkpoint.py" --arch minimax_m2 --out "$out" \
  --hidden 3072 --layers 2 --heads 48 --kv-heads 8 --head-dim 128 --rotary-dim 64 \
  --intermediate 1536 --experts 32 --top-k 8 --vocab 8192 --rope-theta 5000000 --eps 1e-6 \
  --bos 1 --eos 2 --seed 0 --bias-std 0.001 "$@"
