#!/bin/bash
# An --idle-hook for soak.mjs: at an idle point (traffic paused), writes the server's memory to
# $SOAK_OUT/heap/$SOAK_LABEL.*: smaps_rollup, smaps, the thread count, and the allocator's own
# view, called in the process through gdb (a ~1 s stop):
#  - glibc: malloc_info's XML (.malloc_info.xml: one <heap> per arena, free chunks, mmapped bytes);
#  - jemalloc: malloc_stats_print to the server's stderr (its log in the soak's OUT), and with
#    MALLOC_CONF=prof:true a heap profile for jeprof (where MALLOC_CONF's prof_prefix says);
#  - mimalloc: mi_stats_print to the server's stderr.
#   bench/soak/run.sh --duration 540 --idle-hook "$PWD/bench/soak/heap_dump.sh"
# For diagnosis, not for the figures: the stop lengthens each pause by 1-3 s, and after a pause
# longer than the server's keep-alive timeout (5 s) some of the client's pooled connections race
# the server closing them (a 540 s jemalloc run: 41 "Connection error" answers right after one
# pause, counted as unexpected).
set -u
d="$SOAK_OUT/heap"
mkdir -p "$d"
f="$d/$SOAK_LABEL"
cat "/proc/$SOAK_PID/smaps_rollup" > "$f.rollup" 2>/dev/null
cat "/proc/$SOAK_PID/smaps" > "$f.smaps" 2>/dev/null
ls "/proc/$SOAK_PID/task" | wc -l > "$f.threads"
calls=()
if grep -q jemalloc "/proc/$SOAK_PID/maps" 2>/dev/null; then
  calls+=(-ex 'call (void)malloc_stats_print((void*)0, (void*)0, "gblxea")')
  if tr '\0' '\n' < "/proc/$SOAK_PID/environ" | grep -q '^MALLOC_CONF=.*prof:true'; then
    calls+=(-ex 'call (int)mallctl("prof.dump", (void*)0, (void*)0, (void*)0, 0)')
  fi
elif grep -q mimalloc "/proc/$SOAK_PID/maps" 2>/dev/null; then
  calls+=(-ex 'call (void)mi_stats_print((void*)0)')
else
  calls+=(-ex "call (int)malloc_info(0, (void*)fopen(\"$f.malloc_info.xml\", \"w\"))")
fi
timeout 50 gdb -q -batch -nx -p "$SOAK_PID" "${calls[@]}" -ex 'call (int)fflush((void*)0)' \
  -ex detach > "$f.gdb.txt" 2>&1 || true
