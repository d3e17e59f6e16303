#!/bin/bash
# Side-by-side throughput of moeserve, ik_llama.cpp and mainline llama.cpp on the same weights (an HF
# checkpoint for moeserve, the GGUF that tools/hf2gguf.py writes from it for the other two). Engines
# alternate within every round (the starting engine rotates), so slow drifts of a shared machine hit
# all of them; the table holds medians across rounds. See bench/compare/README.md.
#   bench/compare/run.sh [--model HF_DIR] [--gguf F.gguf] [--ik IK_DIR] [--llama LLAMA_DIR]
#                        [--moeserve BIN] [--rounds R] [--threads T]
# Environment (the options override): HF (model folder for moeserve), GGUF, IK_DIR / LLAMA_DIR
# (checkouts built into build/bin; IK_BIN / LLAMA_BIN point at another bin folder), MOESERVE (binary,
# default build/src/apps/moeserve), R (rounds, default 2), THREADS (2), PP / TG / REPS (512 / 64 / 3),
# NPP / NTG / NPL (batched: 128 / 32 / 16), ENGINES (subset of "moeserve ik llama"), IK_FLAGS / LLAMA_FLAGS
# (extra llama-bench flags; default "-rtr 1" / none), IK_BATCHED_FLAGS / LLAMA_BATCHED_FLAGS (extra
# llama-batched-bench flags; default "-rtr" / none: ik's common -rtr takes no value), MOESERVE_FLAGS
# (extra `moeserve bench` flags), LOGDIR (raw logs and results.tsv; default a new /tmp folder),
# DEPTH (a context length, default 0 = off: also a DEPTH-token prefill and TG tokens decoded after
# it, one repetition per round; llama-bench -p DEPTH -gp DEPTH,TG: the KV cache and attention,
# not only the weights, set that decode's speed).
# An engine whose directory / binary is not given or not built is skipped (its column reads "-").
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
while [ $# -gt 0 ]; do
  case $1 in
    --model) HF=$2; shift 2 ;;
    --gguf) GGUF=$2; shift 2 ;;
    --ik) IK_DIR=$2; shift 2 ;;
    --llama) LLAMA_DIR=$2; shift 2 ;;
    --moeserve) MOESERVE=$2; shift 2 ;;
    --rounds) R=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | cut -c3-; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
R=${R:-2} THREADS=${THREADS:-2} PP=${PP:-512} TG=${TG:-64} REPS=${REPS:-3}
NPP=${NPP:-128} NTG=${NTG:-32} NPL=${NPL:-16} DEPTH=${DEPTH:-0}
IK_FLAGS=${IK_FLAGS--rtr 1} LLAMA_FLAGS=${LLAMA_FLAGS:-} MOESERVE_FLAGS=${MOESERVE_FLAGS:-}
IK_BATCHED_FLAGS=${IK_BATCHED_FLAGS--rtr} LLAMA_BATCHED_FLAGS=${LLAMA_BATCHED_FLAGS:-}
MOESERVE=${MOESERVE:-$ROOT/build/src/apps/moeserve}
IK_BIN=${IK_BIN:-${IK_DIR:+$IK_DIR/build/bin}}
LLAMA_BIN=${LLAMA_BIN:-${LLAMA_DIR:+$LLAMA_DIR/build/bin}}
[ -z "$IK_BIN" ] || [ ! -d "$IK_BIN" ] || IK_BIN=$(realpath "$IK_BIN")
[ -z "$LLAMA_BIN" ] || [ ! -d "$LLAMA_BIN" ] || LLAMA_BIN=$(realpath "$LLAMA_BIN")
LOGDIR=${LOGDIR:-$(mktemp -d /tmp/moeserve-compare.XXXXXX)}
mkdir -p "$LOGDIR"
LOGDIR=$(cd "$LOGDIR" && pwd)
[ -z "${GGUF:-}" ] || GGUF=$(realpath "$GGUF")  # the llama.cpp tools run in LOGDIR (ik's write llama.log)
RES=$LOGDIR/results.tsv
: > "$RES"

want() { case " ${ENGINES:-moeserve ik llama} " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
engines=()
if want moeserve; then
  if [ -n "${HF:-}" ] && [ -x "$MOESERVE" ]; then engines+=(moeserve)
  else echo "skipping moeserve: set HF (model folder) and build $MOESERVE" >&2; fi
fi
for e in ik llama; do
  want $e || continue
  bin=$([ $e = ik ] && echo "${IK_BIN:-}" || echo "${LLAMA_BIN:-}")
  if [ -n "${GGUF:-}" ] && [ -x "$bin/llama-bench" ] && [ -x "$bin/llama-batched-bench" ]; then engines+=($e)
  else echo "skipping $e: set GGUF and ${e^^}_DIR (with build/bin/llama-bench, llama-batched-bench)" >&2; fi
done
[ ${#engines[@]} -gt 0 ] || { echo "no engine to run" >&2; exit 1; }

commit() { git -C "$1" log -1 --format='%h %cs' 2>/dev/null || echo "?"; }
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
isa=""
for f in avx512f avx512_bf16 avx512_vnni avx_vnni avx2; do [[ " $flags " == *" $f "* ]] && isa+="$f "; done
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'); ISA flags: ${isa:-none of avx2/avx512}; MOESERVE_ISA=${MOESERVE_ISA:-unset}"
echo "threads $THREADS, rounds $R; prefill $PP, decode $TG (x$REPS); batched: $NPL seqs, moeserve ctx $PP+$TG, llama npp $NPP ntg $NTG; depth $DEPTH"
for e in "${engines[@]}"; do
  case $e in
    moeserve) echo "moeserve: $MOESERVE ($(commit "$ROOT")), model $HF $MOESERVE_FLAGS" ;;
    ik) echo "ik_llama.cpp: $IK_BIN ($(commit "${IK_DIR:-$IK_BIN}")), $GGUF; bench: $IK_FLAGS; batched: $IK_BATCHED_FLAGS" ;;
    llama) echo "llama.cpp: $LLAMA_BIN ($(commit "${LLAMA_DIR:-$LLAMA_BIN}")), $GGUF; bench: $LLAMA_FLAGS; batched: $LLAMA_BATCHED_FLAGS" ;;
  esac
done
echo "logs: $LOGDIR"

run_moeserve() {  # $1 round
  local log=$LOGDIR/moeserve.r$1.log
  # shellcheck disable=SC2086
  "$MOESERVE" bench --model "$HF" --runs "$REPS" --prompt-len "$PP" --decode-tokens "$TG" \
    --threads "$THREADS" --decode-batch "$NPL" --batch-tokens both $MOESERVE_FLAGS > "$log" 2>&1 ||
    { echo "moeserve bench failed, see $log" >&2; return 0; }
  awk -v r="$1" -v npl="$NPL" '
    /^prefill \(/ { for (i = 1; i < NF; i++) if ($(i+1) == "tok/s") { print r "\tmoeserve\tprefill\t" $i; break } }
    /^decode \(batch 1\):/ { print r "\tmoeserve\tdecode\t" $4 }
    $0 ~ "^decode \\(batch " npl "\\):.*distinct tokens" { print r "\tmoeserve\tbatch\t" $4 }
    $0 ~ "^decode \\(batch " npl "\\):.*same tokens" { print r "\tmoeserve\tbatch_same\t" $4 }' "$log" >> "$RES"
  [ "$DEPTH" -gt 0 ] || return 0
  log=$LOGDIR/moeserve.depth.r$1.log
  # shellcheck disable=SC2086
  "$MOESERVE" bench --model "$HF" --runs 1 --prompt-len "$DEPTH" --decode-tokens "$TG" \
    --threads "$THREADS" $MOESERVE_FLAGS > "$log" 2>&1 ||
    { echo "moeserve bench (depth) failed, see $log" >&2; return 0; }
  awk -v r="$1" '
    /^prefill \(/ { for (i = 1; i < NF; i++) if ($(i+1) == "tok/s") { print r "\tmoeserve\tprefill_depth\t" $i; break } }
    /^decode \(batch 1\):/ { print r "\tmoeserve\tdecode_depth\t" $4 }' "$log" >> "$RES"
}

run_llama() {  # $1 round, $2 engine (ik|llama)
  local bin flags bflags log
  bin=$([ "$2" = ik ] && echo "$IK_BIN" || echo "$LLAMA_BIN")
  flags=$([ "$2" = ik ] && echo "$IK_FLAGS" || echo "$LLAMA_FLAGS")
  bflags=$([ "$2" = ik ] && echo "$IK_BATCHED_FLAGS" || echo "$LLAMA_BATCHED_FLAGS")
  log=$LOGDIR/$2.bench.r$1
  # shellcheck disable=SC2086
  if (cd "$LOGDIR" && exec "$bin/llama-bench" -m "$GGUF" -t "$THREADS" -p "$PP" -n "$TG" -r "$REPS" -o json $flags) \
       > "$log.json" 2> "$log.err"; then
    /usr/bin/env python3 - "$log.json" "$1" "$2" >> "$RES" <<'EOF'
import json, statistics, sys
rows = json.load(open(sys.argv[1]))
for row in rows:
    ts = row.get("samples_ts") or [row["avg_ts"]]
    kind = "prefill" if row["n_gen"] == 0 else "decode" if row["n_prompt"] == 0 else None
    if kind: print(f"{sys.argv[2]}\t{sys.argv[3]}\t{kind}\t{statistics.median(ts):.2f}")
EOF
  else echo "$2 llama-bench failed, see $log.err" >&2; fi
  if [ "$DEPTH" -gt 0 ]; then
    log=$LOGDIR/$2.depth.r$1
    # shellcheck disable=SC2086
    if (cd "$LOGDIR" && exec "$bin/llama-bench" -m "$GGUF" -t "$THREADS" -p "$DEPTH" -n 0 \
          -gp "$DEPTH,$TG" -r 1 -o json $flags) > "$log.json" 2> "$log.err"; then
      /usr/bin/env python3 - "$log.json" "$1" "$2" >> "$RES" <<'EOF'
import json, statistics, sys
for row in json.load(open(sys.argv[1])):
    ts = row.get("samples_ts") or [row["avg_ts"]]
    kind = "prefill_depth" if row["n_gen"] == 0 else "decode_depth"
    print(f"{sys.argv[2]}\t{sys.argv[3]}\t{kind}\t{statistics.median(ts):.2f}")
EOF
    else echo "$2 llama-bench (depth) failed, see $log.err" >&2; fi
  fi
  log=$LOGDIR/$2.batched.r$1.log
  # shellcheck disable=SC2086
  if (cd "$LOGDIR" && exec "$bin/llama-batched-bench" -m "$GGUF" -t "$THREADS" -c 4096 -b 2048 -ub 512 -npp "$NPP" \
       -ntg "$NTG" -npl "1,$NPL" $bflags) > "$log" 2>&1; then
    # | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |
    # ik's llama-batched-bench feeds token 0 to every sequence (all route to the same experts),
    # mainline's random tokens: each is compared with moeserve's run of the same kind.
    local kind=$([ "$2" = ik ] && echo batch_same || echo batch)
    awk -F'|' -v r="$1" -v e="$2" -v npl="$NPL" -v kind="$kind" '
      NF >= 11 && $4 + 0 == npl && $2 ~ /[0-9]/ { gsub(/ /, "", $9); print r "\t" e "\t" kind "\t" $9 }' \
      "$log" >> "$RES"
  else echo "$2 llama-batched-bench failed, see $log" >&2; fi
}

n=${#engines[@]}
for ((r = 1; r <= R; r++)); do
  for ((k = 0; k < n; k++)); do
    e=${engines[$(((r - 1 + k) % n))]}
    echo "round $r: $e" >&2
    if [ "$e" = moeserve ]; then run_moeserve "$r"; else run_llama "$r" "$e"; fi
  done
done

/usr/bin/env python3 - "$RES" "$NPL" "$DEPTH" <<'EOF'
import collections, statistics, sys
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, e, m, x = line.split("\t"); v[e, m].append(float(x))
med = {k: statistics.median(x) for k, x in v.items()}
cols = [("moeserve", "moeserve"), ("ik", "ik_llama.cpp"), ("llama", "llama.cpp")]
rows = [("prefill", "prefill tok/s"), ("decode", "decode b1 tok/s"),
        ("batch", f"{sys.argv[2]}-seq, own tokens"), ("batch_same", f"{sys.argv[2]}-seq, same token"),
        ("prefill_depth", f"prefill {sys.argv[3]} tok/s"), ("decode_depth", f"decode @{sys.argv[3]} tok/s")]
def f(k): return f"{med[k]:.1f}" if k in med else "-"
def ratio(m, e): return f"{med['moeserve', m] / med[e, m]:.2f}" if ('moeserve', m) in med and (e, m) in med else "-"
print(f"\n{'':22}" + "".join(f"{n:>14}" for _, n in cols) + f"{'ms/ik':>9}{'ms/llama':>10}   n(rounds)")
for m, name in rows:
    if not any(k[1] == m for k in med): continue
    print(f"{name:22}" + "".join(f"{f((e, m)):>14}" for e, _ in cols)
          + f"{ratio(m, 'ik'):>9}{ratio(m, 'llama'):>10}   "
          + "/".join(str(len(v[e, m])) for e, _ in cols if (e, m) in v))
EOF
