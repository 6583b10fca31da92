#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU: everything gpuprobe says about a real card, written
# under one folder (and tarred into one file) so that the recordings can replace the synthesised
# fixtures in tests/data/ and the figures in docs/ (issue 14). docs/gpu-session.md is the plan
# for a lent machine (30 minutes of device time): benchmarks/gpu_session.sh runs this there.
#
#   benchmarks/gpu_sweep.sh [--dry-run] [--out DIR] [--tar FILE] [--wheels DIR] [--python PY]
#                           [--quick] [--lean] [--deadline SECONDS] [--only STEP[,STEP...]]
#
# Steps (each one's output in DIR/<step>.*; DIR/steps.tsv has step, exit code, seconds), in order
# of what a short lease needs most:
#   suite        the whole test suite but the gpu-marked tests (pytest -n 4: the tests that start
#                DataLoader workers need free cores), from the start on the last 6 cores when
#                there are 12 or more, else last
#   info         gpuprobe info --json (the snapshot format of tests/data/*.json) and the text view
#   top          top's one frame at 80 columns and three samples as JSON lines
#   gpu-tests    pytest -m gpu (the tests skipped on machines without a GPU), JUnit XML
#   anchors      gpu_anchors.py: d2d copy, bf16 GEMM, launch, pinned h2d beside torch/triton
#   doctor       the full doctor (real kernels on every GPU), JSON
#   trace-*      each examples/ pair writes a profiler trace into DIR/traces/
#   run-starved  gpuprobe run around a CPU-starved training loop (examples/loader_single_process.py)
#   run-train    gpuprobe run around its fixed twin (examples/loader_workers.py)
#   bench-torch  every workload on torch (CPU and GPU), JSON, charts
#   scale        least squares on Dask workers over CuPy arrays, and its fp64 rate vs the peak
#   overhead     the sampler's CPU at 2 and 20 Hz watching a GPU process
#   fit, precision, pack     the memory commands on the GPU
#   fleet        doctor --cluster and bench --cluster on two Dask workers sharing the card
#   bench-jax, bench-cupy    every workload on JAX and CuPy, on the GPU
# and, unless --lean (which leaves them to the machine that reads the tar: they need no card),
#   doctor-from-snapshot, plot-*, diagnose-*, compare-* (the traces diagnosed, each slow one
#   beside its fixed twin), hta (diagnose vs Holistic Trace Analysis, goal 0.1 pp), scale-cpu,
#   bench-numpy
# and finally the tar. Each step has a timeout; --deadline stops starting steps that would end
# past SECONDS after the start (they are recorded as "skip"), so the tar is always written.
# --only runs the steps whose names start with one of the given prefixes (e.g. --only trace,hta).
#
# --dry-run checks everything but the card, here: every command line parses with gpuprobe's own
# parser, every script exists and compiles (those with a --check run it), the wheel builds, the
# wheels folder (if given) installs, and the tar step works. It writes DIR/steps.tsv as the real
# run does.
#
# With --wheels DIR the project's wheel and any missing pure-Python dependencies are installed
# from DIR with --no-index --no-deps into DIR/../.site (outside the tar), put first on
# PYTHONPATH. `make gpu-wheels` fills .whl/ for the lent H100/H200 (see docs/gpu-session.md).
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
DRY=0
LEAN=0
QUICK=0
OUT=""
TAR=""
WHEELS=""
DEADLINE=0
ONLY=""
PY="${PYTHON:-python3}"
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) DRY=1 ;;
        --quick) QUICK=1 ;;
        --lean) LEAN=1 ;;
        --out) OUT="$2"; shift ;;
        --tar) TAR="$2"; shift ;;
        --wheels) WHEELS="$2"; shift ;;
        --python) PY="$2"; shift ;;
        --deadline) DEADLINE="$2"; shift ;;
        --only) ONLY="$2"; shift ;;
        -h|--help) sed -n '2,44p' "$0"; exit 0 ;;
        *) echo "gpu_sweep.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
case "$DEADLINE" in
    ''|*[!0-9]*) echo "gpu_sweep.sh: --deadline takes whole seconds, not '$DEADLINE'" >&2; exit 2 ;;
esac
OUT="${OUT:-$ROOT/gpu-sweep-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT/traces" || { echo "gpu_sweep.sh: cannot create $OUT" >&2; exit 2; }
OUT="$(cd "$OUT" && pwd)"
TAR="${TAR:-$OUT.tar.gz}"
LOG="$OUT/sweep.log"
exec 3>&1  # say() writes here: each step's own stdout may be redirected into a result file
: >"$OUT/steps.tsv"
cd "$ROOT"
START=$(date +%s)

say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG" >&3; }

# -- environment ----------------------------------------------------------------------------------
if [ -n "$WHEELS" ]; then
    SITE="$(dirname "$OUT")/.site-$(basename "$OUT")"
    if ! "$PY" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$SITE" \
        "$WHEELS"/*.whl >>"$LOG" 2>&1; then
        say "FAIL: the wheels in $WHEELS do not install (see $LOG)"
        exit 1
    fi
    # the checkout's own src/ first: the sweep runs the code as it is now, not as it was when
    # the wheel (kept for its console script) was built
    export PYTHONPATH="$ROOT/src:$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
export MPLBACKEND=Agg
if ! "$PY" -c "import gpuprobe" 2>>"$LOG"; then
    say "FAIL: $PY cannot import gpuprobe (install the wheel, or pass --wheels DIR)"
    exit 1
fi
GP=("$PY" -m gpuprobe)
# HTA (the traceinsight package) runs in this python when it imports; the corpus script clears
# PYTHONPATH for HTA's process, so a wrapper puts it back.
HTA_PY="$OUT/.hta-python"
printf '#!/bin/sh\nPYTHONPATH="%s" exec "%s" "$@"\n' "${PYTHONPATH:-}" "$(command -v "$PY")" \
    >"$HTA_PY"
chmod +x "$HTA_PY"

wanted() {  # is step $1 among --only's prefixes (all steps when --only is not given)?
    [ -z "$ONLY" ] && return 0
    local p
    for p in ${ONLY//,/ }; do
        case "$1" in "$p"*) return 0 ;; esac
    done
    return 1
}

# One step: run it (or, dry, check it), record its exit code and time, never stop the sweep.
# step NAME TIMEOUT_S KIND -- ARGV...   KIND: gp (gpuprobe arguments) | py (a python script)
#                          | pyc (a python script with --check) | cmd (any command)
step() {
    local name="$1" limit="$2" kind="$3"
    shift 4
    wanted "$name" || return 0
    local t0 rc left
    t0=$(date +%s)
    if [ "$DRY" = 0 ] && [ "$DEADLINE" -gt 0 ]; then
        left=$(( DEADLINE - (t0 - START) - 15 ))  # 15 s kept for the tar
        if [ "$left" -lt 20 ]; then
            printf '%s\tskip\t0\n' "$name" >>"$OUT/steps.tsv"
            say "$name: skipped (the deadline is ${DEADLINE} s)"
            return 0
        fi
        [ "$left" -lt "$limit" ] && limit="$left"
    fi
    # what was started: a step with no row in steps.tsv was cut (the card went back) only if
    # it is named here; its output file exists either way (made by the redirection of its line)
    [ "$DRY" = 1 ] || echo "$name" >>"$OUT/started.txt"
    if [ "$DRY" = 1 ]; then
        case "$kind" in
            gp)  # one checker for every line (a Python start each was most of the dry run)
                printf '%s\x1f' "$@" >&"${CHECK[1]}"; printf '\n' >&"${CHECK[1]}"
                read -r rc <&"${CHECK[0]}" || rc=1 ;;
            py) "$PY" -m py_compile "$1" >>"$LOG" 2>&1; rc=$? ;;
            pyc) "$PY" "$@" --check >>"$LOG" 2>&1; rc=$? ;;
            cmd) command -v "$1" >/dev/null 2>&1; rc=$? ;;
        esac
    else
        case "$kind" in
            gp) timeout -k 10 "$limit" "${GP[@]}" "$@" ; rc=$? ;;
            py|pyc) timeout -k 10 "$limit" "$PY" "$@" ; rc=$? ;;
            cmd) timeout -k 10 "$limit" "$@" ; rc=$? ;;
        esac
    fi
    printf '%s\t%s\t%s\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" >>"$OUT/steps.tsv"
    say "$name: exit $rc in $(( $(date +%s) - t0 )) s"
    return 0
}

if [ "$DRY" = 1 ]; then
    say "dry run: checking everything but the card, into $OUT"
    # every gp line parses with gpuprobe's own parser: one line of arguments (split by \x1f) in,
    # its exit code out (2 with the parser's message in the log on a bad line)
    coproc CHECK { "$PY" -c '
import sys
from gpuprobe.cli import build_parser
for line in sys.stdin:
    argv = line.rstrip("\n").split("\x1f")[:-1]
    try:
        args = build_parser().parse_args(argv)
        rc = 0 if getattr(args, "handler", None) is not None else 1
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
    if rc:
        print(f"bad command line: {argv}", file=sys.stderr, flush=True)
    print(rc, flush=True)
' 2>>"$LOG"; }
    # the project's wheel builds (no network: the build backend already installed here), from a
    # copy of the checkout: setuptools builds in the source folder, and leaves build/ there
    WHL="$OUT/.wheel"
    mkdir -p "$WHL/src"
    for part in pyproject.toml README.md src docs contrib; do
        [ -e "$ROOT/$part" ] && cp -R "$ROOT/$part" "$WHL/src/"
    done
    rm -rf "$WHL"/src/src/*.egg-info
    if "$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$WHL" "$WHL/src" >>"$LOG" 2>&1 \
        && ls "$WHL"/gpuprobe-*.whl >/dev/null 2>&1; then
        printf 'wheel\t0\t0\n' >>"$OUT/steps.tsv"; say "wheel: built $(basename "$WHL"/gpuprobe-*.whl)"
    else
        printf 'wheel\t1\t0\n' >>"$OUT/steps.tsv"; say "wheel: FAILED to build (see $LOG)"
    fi
    for f in examples/loader_workers.py examples/loader_single_process.py; do
        [ -f "$f" ] || { printf 'exists %s\t1\t0\n' "$f" >>"$OUT/steps.tsv"; say "missing $f"; }
    done
else
    say "sweep into $OUT (deadline ${DEADLINE:-none} s)"
    nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || say "nvidia-smi failed (see nvidia-smi.txt)"
    nvidia-smi -q >"$OUT/nvidia-smi-q.txt" 2>&1
    "$PY" -m pip list >"$OUT/pip-list.txt" 2>&1
    { date -u +%Y-%m-%dT%H:%M:%SZ; uname -a; nproc; free -g; } >"$OUT/machine.txt" 2>&1
fi

BUDGET=0.25
[ "$QUICK" = 1 ] && BUDGET=0.1
T="$OUT/traces"

# -- read the machine (before the steps are pinned to some of its cores) ----------------------
step info 120 gp -- info --json >"$OUT/info.json" 2>>"$LOG"
step info-text 120 gp -- info >"$OUT/info.txt" 2>>"$LOG"
# top's one frame at 80 columns, and three samples as JSON (the card idle)
COLUMNS=80 LINES=24 step top 60 gp -- top --once >"$OUT/top.txt" 2>>"$LOG"
step top-json 60 gp -- top --json --iterations 3 --interval 0.5 >"$OUT/top.jsonl" 2>>"$LOG"

# -- the whole suite but the gpu-marked tests, beside the card's steps -------------------------------
# On a machine of 12 cores or more it runs from the start on the last 6 cores (niced), while the
# steps below keep to the others: the card's time is short. Elsewhere it runs last.
NCPU="${GPU_SWEEP_NCPU:-$(nproc 2>/dev/null || echo 1)}"
SUITE_PID=""
suite_cmd() {
    "$PY" -c "import xdist" >>"$LOG" 2>&1 && XD=(-n "$1") || XD=()
    "$PY" -m pytest -q -m "not gpu" "${XD[@]}" -p no:cacheprovider \
        --junitxml="$OUT/suite.xml" ${GPU_SWEEP_SUITE_ARGS:-tests} >"$OUT/suite.txt" 2>&1
}
if [ "$DRY" = 0 ] && [ "$NCPU" -ge 12 ] && wanted suite && command -v taskset >/dev/null; then
    (
        t0=$(date +%s)
        timeout -k 10 600 taskset -c "$(( NCPU - 6 ))-$(( NCPU - 1 ))" nice -n 5 \
            bash -c "$(declare -f suite_cmd); PY='$PY' OUT='$OUT' LOG='$LOG' suite_cmd 4"
        rc=$?
        printf '%s\t%s\t%s\n' suite "$rc" "$(( $(date +%s) - t0 ))" >>"$OUT/steps.tsv"
        say "suite (beside the card's steps): exit $rc in $(( $(date +%s) - t0 )) s"
    ) &
    SUITE_PID=$!
    taskset -pc "0-$(( NCPU - 7 ))" $$ >>"$LOG" 2>&1
fi

# -- the gpu-marked tests -------------------------------------------------------------------------
if [ "$DRY" = 1 ]; then
    step gpu-tests 0 cmd -- "$PY"
    "$PY" -m pytest --co -q -m gpu tests >"$OUT/gpu-tests.collect.txt" 2>&1
    printf 'gpu-tests-collect\t%s\t0\n' "$?" >>"$OUT/steps.tsv"
else
    step gpu-tests 360 cmd -- "$PY" -m pytest -q -m gpu -p no:cacheprovider \
        --junitxml="$OUT/gpu-tests.xml" tests >"$OUT/gpu-tests.txt" 2>&1
fi

# -- the anchors: each GPU figure beside its reference ---------------------------------------
step anchors 300 pyc -- "$HERE/gpu_anchors.py" --out "$OUT/anchors.json" >"$OUT/anchors.txt" 2>>"$LOG"
step doctor 300 gp -- doctor --json >"$OUT/doctor.json" 2>>"$LOG"

# -- traces from examples/, and real jobs under run -----------------------------------------------
PAIRS="item_every_step:item_fixed pageable_copies:pinned_copies fp32_matmul:tf32_matmul"
PAIRS="$PAIRS python_loop_mask:vectorized_mask"
for pair in $PAIRS; do
    for ex in "${pair%%:*}" "${pair##*:}"; do
        step "trace-$ex" 180 py -- "examples/$ex.py" "$T/$ex.json.gz" >>"$LOG" 2>&1
    done
done
step run-starved 180 gp -- run --hz 5 --out "$OUT/run-starved" --json -- "$PY" \
    examples/loader_single_process.py "$T/loader_single_process.json.gz" 300 \
    >"$OUT/run-starved.json" 2>>"$LOG"
step run-train 180 gp -- run --hz 5 --out "$OUT/run-train" --json -- "$PY" \
    examples/loader_workers.py "$T/loader_workers.json.gz" 300 >"$OUT/run-train.json" 2>>"$LOG"

# -- profile (issue 26): an unmodified training script profiled in its steady steps on the card,
# starved (the DataLoader in the training process) and fed (4 workers) ------------------------------
step profile-train 180 gp -- profile --out "$OUT/profile-train" --json -- "$PY" \
    examples/train.py --steps 60 >"$OUT/profile-train.json" 2>>"$LOG"
step profile-workers 180 gp -- profile --out "$OUT/profile-workers" --json -- "$PY" \
    examples/train.py --steps 60 --workers 4 >"$OUT/profile-workers.json" 2>>"$LOG"

# -- bench: every workload, one framework at a time (a step cut by its timeout keeps the others);
# torch on the CPU too (the crossover), the others on the card alone ---------------------------------
bench() {  # bench FRAMEWORK [bench arguments...]
    local fw="$1"
    shift
    step "bench-$fw" 420 gp -- bench --backend "$fw" --budget "$BUDGET" --no-save --json "$@" \
        --plot "$OUT/bench-$fw.png" >"$OUT/bench-$fw.json" 2>>"$LOG"
}
# -- scale: least squares over CuPy arrays, one Dask worker per GPU --------------------------------
step scale 360 pyc -- "$HERE/gpu_sweep_lstsq.py" --out "$OUT/scale-lstsq.json" >"$OUT/scale.txt" 2>>"$LOG"

# -- the fleet commands on a Dask cluster of two workers sharing the card -----------------------------
step fleet 300 pyc -- "$HERE/gpu_fleet.py" --out "$OUT" >"$OUT/fleet.txt" 2>>"$LOG"

# -- what watching costs, with a GPU to read ------------------------------------------------------
step overhead 150 py -- "$HERE/monitor_overhead.py" --gpu-child --sampler-only \
    --out "$OUT/overhead.json" >"$OUT/overhead.txt" 2>>"$LOG"

# -- memory ---------------------------------------------------------------------------------------
step fit 300 gp -- fit --device cuda --json >"$OUT/fit.json" 2>>"$LOG"
step precision 180 gp -- precision --device cuda --json >"$OUT/precision.json" 2>>"$LOG"
step pack 240 gp -- pack -n 1,2,4 --json -- "$PY" -m gpuprobe precision --device cuda \
    --dtypes fp16 --budget 0.3 --json >"$OUT/pack.json" 2>>"$LOG"
# -- the profile hook's cost outside its window, on a quieter machine than ours (issue 26)
step profile-overhead 200 py -- "$HERE/profile_overhead.py" --quick \
    --out "$OUT/profile-overhead.json" >"$OUT/profile-overhead.txt" 2>>"$LOG"
bench torch
bench jax --device cuda
bench cupy --device cuda

# -- what needs no card: --lean leaves it to the machine the tar is read on -------------------------
if [ "$LEAN" = 0 ]; then
    step doctor-from-snapshot 60 gp -- doctor --from "$OUT/info.json" \
        >"$OUT/doctor-from-info.txt" 2>>"$LOG"
    for d in run-train run-starved; do
        step "plot-$d" 120 gp -- plot --out "$OUT/$d.png" "$OUT/$d" >>"$LOG" 2>&1
    done
    for pair in $PAIRS loader_single_process:loader_workers; do
        slow="${pair%%:*}"; fixed="${pair##*:}"
        step "diagnose-$slow" 120 gp -- diagnose --json --html "$OUT/diagnose-$slow.html" \
            "$T/$slow.json.gz" >"$OUT/diagnose-$slow.json" 2>>"$LOG"
        step "compare-$slow" 120 gp -- diagnose --compare "$T/$slow.json.gz" \
            "$T/$fixed.json.gz" >"$OUT/compare-$slow.txt" 2>>"$LOG"
    done
    step hta 300 py -- "$HERE/diagnose_vs_hta_corpus.py" --corpus "$T" --multirank "" \
        --hta-python "$HTA_PY" --timeout 120 --out "$OUT/diagnose-vs-hta" >"$OUT/hta.txt" 2>>"$LOG"
    step scale-cpu 300 gp -- scale lstsq --rows 200000 --cols 200 --workers 1,2 --json \
        --plot "$OUT/scale-lstsq-cpu.png" >"$OUT/scale-lstsq-cpu.json" 2>>"$LOG"
    step bench-numpy 420 gp -- bench --backend numpy --budget "$BUDGET" --no-save --json \
        --plot "$OUT/bench-numpy.png" >"$OUT/bench-numpy.json" 2>>"$LOG"
fi

# -- the whole suite: beside the steps (above), or now ------------------------------------------------
if [ "$DRY" = 1 ]; then
    step suite 0 cmd -- "$PY"
elif [ -n "$SUITE_PID" ]; then
    wait "$SUITE_PID"
elif wanted suite; then
    t0=$(date +%s)
    suite_cmd 8
    rc=$?
    printf '%s\t%s\t%s\n' suite "$rc" "$(( $(date +%s) - t0 ))" >>"$OUT/steps.tsv"
    say "suite: exit $rc in $(( $(date +%s) - t0 )) s"
fi

step bad-line 10 gp -- bench --no-such-flag >/dev/null 2>>"$LOG"

# -- one file to carry back -----------------------------------------------------------------------
tar -czf "$TAR" -C "$(dirname "$OUT")" --exclude=.wheel --exclude=.hta-python "$(basename "$OUT")"
printf 'tar\t%s\t0\n' "$?" >>"$OUT/steps.tsv"
failed=$(awk -F'\t' '$2 != 0 && $2 != "skip"' "$OUT/steps.tsv" | wc -l)
skipped=$(awk -F'\t' '$2 == "skip"' "$OUT/steps.tsv" | wc -l)
say "done: $(wc -l <"$OUT/steps.tsv") steps, $failed failed, $skipped skipped; $TAR"
[ "$failed" = 0 ] || exit 1
[ "$skipped" = 0 ] || exit 3
exit 0
