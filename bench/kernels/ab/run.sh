#!/bin/bash
# A/B of a change to the MXFP4 x int8 kernel of one ISA (src/kernels/matmul_mxfp4_i8_<isa>.cc):
# A = that file at a git revision (default HEAD), B = the working tree's. Both are compiled with
# the library's own compile command from the build's compile_commands.json (same -O level, same
# -m flags), each in a namespace of its own (<isa>_a / <isa>_b, by a #define around an #include),
# and linked into ab_mxfp4_i8.cc, which interleaves them call by call on the same data beside a
# read probe and checks both against the scalar reference bit for bit.
#
#   bench/kernels/ab/run.sh [--isa amx|avx512|avx2] [--base REV] [--build DIR] [driver options]
#   driver options: --tokens M (1: decode; 16: a prefill tile) --whole --threads N --rows R
#                   --cols C --matrices P --sets S --iters I (ab_mxfp4_i8.cc says what they do)
#
# Defaults: the machine's best ISA, HEAD, ./build (configured and built: the kernels library and
# its dependencies are linked from it). A's file is compiled against the working tree's headers.
# Exit status: the driver's (1 if an output differs from the reference); 77 if the CPU lacks
# the ISA.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ROOT=$PWD
ISA= BASE=HEAD BUILD=build
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --isa) ISA=$2; shift 2 ;;
    --base) BASE=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
if [ -z "$ISA" ]; then
  if grep -qw amx_int8 /proc/cpuinfo && grep -qw avx512_bf16 /proc/cpuinfo; then ISA=amx
  elif grep -qw avx512bw /proc/cpuinfo && grep -qw avx512_vnni /proc/cpuinfo; then ISA=avx512
  else ISA=avx2; fi
fi
case "$ISA" in
  avx2) need=(avx2 fma f16c) ;;
  avx512) need=(avx512f avx512bw avx512vl avx512dq avx512_vnni) ;;
  amx) need=(avx512f avx512bw avx512_bf16 avx512_vnni amx_tile amx_int8) ;;
  *) echo "--isa: amx, avx2 or avx512, not $ISA" >&2; exit 2 ;;
esac
for flag in "${need[@]}"; do  # 77: "skipped" to CTest
  grep -qw "$flag" /proc/cpuinfo || { echo "SKIPPED: this CPU lacks $flag ($ISA)"; exit 77; }
done
BUILD=$(cd "$BUILD" && pwd)
DB=$BUILD/compile_commands.json
[ -f "$DB" ] || { echo "no $DB: configure the build first (cmake -S . -B build)" >&2; exit 2; }
KERNEL=src/kernels/matmul_mxfp4_i8_$ISA.cc
OUT=$BUILD/bench/kernels/ab
mkdir -p "$OUT"

git -C "$ROOT" show "$BASE:$KERNEL" > "$OUT/base_$ISA.cc"
printf '#define %s %s_a\n#include "%s"\n' "$ISA" "$ISA" "$OUT/base_$ISA.cc" > "$OUT/a_$ISA.cc"
printf '#define %s %s_b\n#include "%s"\n' "$ISA" "$ISA" "$ROOT/$KERNEL" > "$OUT/b_$ISA.cc"

# The compile command of a file in the database, re-aimed at another source and object.
command_for() {  # file_in_db source object [extra flags]
  /usr/bin/python3 - "$DB" "$@" <<'PY'
import json, shlex, sys
db, want, src, obj = sys.argv[1:5]
extra = sys.argv[5:]
for e in json.load(open(db)):
    if e["file"].endswith(want):
        args = e.get("arguments") or shlex.split(e["command"])
        out, skip = [], False
        for a in args:
            if skip:
                skip = False
            elif a in ("-o", "-c"):
                skip = True
            else:
                out.append(a)
        print(shlex.join(out + extra + ["-c", src, "-o", obj]))
        sys.exit(0)
sys.exit("no compile command for " + want)
PY
}
eval "$(command_for "$KERNEL" "$OUT/a_$ISA.cc" "$OUT/a_$ISA.o")"
eval "$(command_for "$KERNEL" "$OUT/b_$ISA.cc" "$OUT/b_$ISA.o")"
# The amx kernel takes a worker's scratch (AB_AMX: the driver passes its threads' own).
DRIVER_FLAGS=("-DAB_ISA=$ISA" "-DAB_A=${ISA}_a" "-DAB_B=${ISA}_b")
[ "$ISA" = amx ] && DRIVER_FLAGS+=(-DAB_AMX)
eval "$(command_for bench/kernels/bench_mxfp4_i8.cc "$ROOT/bench/kernels/ab/ab_mxfp4_i8.cc" \
        "$OUT/ab_$ISA.o" "${DRIVER_FLAGS[@]}")"
COMPILE=$(command_for "$KERNEL" x y)
CXX=${COMPILE%% *}
# A sanitizer build's objects need its runtime at link time too.
read -r -a LDFLAGS <<< "$(grep -o -- '-f\(no-\)\{0,1\}sanitize[^ ]*' <<< "$COMPILE" | tr '\n' ' ' || true)"
LIBS=()
for lib in kernels runtime core; do LIBS+=("$BUILD/src/$lib/libmoeserve_$lib.a"); done
"$CXX" "${LDFLAGS[@]}" "$OUT/ab_$ISA.o" "$OUT/a_$ISA.o" "$OUT/b_$ISA.o" "${LIBS[@]}" -lpthread \
  -o "$OUT/ab_$ISA"
echo "A = $KERNEL at $BASE ($(git -C "$ROOT" rev-parse --short "$BASE")), B = the working tree's"
exec "$OUT/ab_$ISA" "${ARGS[@]}"
