#!/usr/bin/env bash
# The command for every device call of a GPU session (docs/gpu-session.md): the same line each
# time, so that calls can follow each other while the machine is still warm.
#
#   bash benchmarks/gpu_session.sh [WAIT_S] [DEADLINE_S] [ONLY]
#
# The first call on a machine starts benchmarks/gpu_sweep.sh in the background, in its own
# process session (so that it outlives the call), with the wheels of .whl/ (`make gpu-wheels`),
# into /tmp/gpu-sweep, with a deadline of DEADLINE_S seconds (default 1380: the sweep ends, tar
# included, inside 23 minutes). Every call, the first too, then waits until the sweep has ended or
# WAIT_S seconds have passed (default 560, inside the tool's 10 minutes a command), and copies
# what there is into $OUT: sweep.tar.gz (split into 15 MiB parts sweep.tar.gz.part-aa, -ab, ...
# when larger: `cat sweep.tar.gz.part-* > sweep.tar.gz`), steps.tsv and session.log. It prints
# the steps so far, and "SWEEP DONE" once the sweep has ended. ONLY (e.g. trace,hta) is passed
# to the sweep's --only: a later session's re-run of the steps a fix touched.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WAIT="${1:-560}"
DEADLINE="${2:-1380}"
ONLY="${3:-}"
SWEEP=/tmp/gpu-sweep
PIDFILE=/tmp/gpu-sweep.pid
OUTDIR="${OUT:-/tmp/gpu-session-out}"
mkdir -p "$OUTDIR"
T0=$(date +%s)

running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

if ! running && [ ! -f "$SWEEP/steps.tsv" ]; then
    echo "starting the sweep (deadline ${DEADLINE} s) on $(nvidia-smi -L 2>/dev/null | head -1)"
    ls "$ROOT"/.whl/*.whl >/dev/null 2>&1 || echo "warning: no wheels in .whl/ (make gpu-wheels)"
    WH=()
    ls "$ROOT"/.whl/*.whl >/dev/null 2>&1 && WH=(--wheels "$ROOT/.whl")
    [ -n "$ONLY" ] && WH+=(--only "$ONLY")
    setsid nohup bash "$ROOT/benchmarks/gpu_sweep.sh" --out "$SWEEP" --tar /tmp/gpu-sweep.tar.gz --lean \
        --python python3 --deadline "$DEADLINE" "${WH[@]}" >/tmp/gpu-sweep.console 2>&1 &
    echo $! >"$PIDFILE"
    sleep 5
fi

while running && [ $(( $(date +%s) - T0 )) -lt "$WAIT" ]; do
    sleep 5
done

# a snapshot of what there is now (the sweep's own tar once it has ended)
if running || [ ! -f /tmp/gpu-sweep.tar.gz ]; then
    tar -czf /tmp/gpu-sweep-snapshot.tar.gz -C /tmp --exclude=.wheel --exclude=.hta-python \
        gpu-sweep 2>/dev/null
    SNAP=/tmp/gpu-sweep-snapshot.tar.gz
else
    SNAP=/tmp/gpu-sweep.tar.gz
fi
rm -f "$OUTDIR"/sweep.tar.gz "$OUTDIR"/sweep.tar.gz.part-*
if [ "$(stat -c %s "$SNAP")" -gt $(( 15 * 2**20 )) ]; then
    split -b 15M "$SNAP" "$OUTDIR/sweep.tar.gz.part-"
else
    cp "$SNAP" "$OUTDIR/sweep.tar.gz"
fi
cp "$SWEEP/steps.tsv" "$OUTDIR/steps.tsv" 2>/dev/null
{ cat /tmp/gpu-sweep.console 2>/dev/null; } >"$OUTDIR/session.log"
column -t -s $'\t' "$SWEEP/steps.tsv" 2>/dev/null || cat "$SWEEP/steps.tsv"
if running; then
    echo "SWEEP RUNNING after $(( $(date +%s) - T0 )) s of this call: call again now"
else
    tail -3 /tmp/gpu-sweep.console
    echo "SWEEP DONE"
fi
