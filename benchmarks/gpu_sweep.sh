#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU: everything gpuprobe says about a real card, written
# under one folder (and tarred into one file) so that the recordings can replace the synthesised
# fixtures in tests/data/ and the figures in docs/.
#
#   benchmarks/gpu_sweep.sh [--dry-run] [--out DIR] [--wheels DIR] [--python PY] [--quick]
#
# Steps (each one's output in DIR/<step>.*; DIR/steps.tsv has step, exit code, seconds):
#   gpu-tests   pytest -m gpu (the tests skipped on machines without a GPU), JUnit XML
#   info        gpuprobe info --json (the snapshot format of tests/data/*.json) and the text view
#   doctor      the full doctor (real kernels on every GPU), JSON and text
#   bench       every workload on every installed framework and device, JSON and charts
#   run-train   gpuprobe run around a real training loop (examples/loader_workers.py)
#   run-starved gpuprobe run around a CPU-starved one (examples/loader_single_process.py)
#   traces      each examples/ pair writes a profiler trace; diagnose reads them (JSON + HTML)
#   fit, precision, pack     the memory commands on the GPU
#   scale       least squares on Dask workers over CuPy arrays (one worker per GPU)
# and finally DIR.tar.gz. Budget: under 20 minutes on one H100/H200 (each step has a timeout).
#
# --dry-run checks everything but the card, here: every command line parses with gpuprobe's own
# parser, every script and example exists and compiles, the wheel builds, the wheels folder (if
# given) installs, and the tar step works. It writes DIR/steps.tsv as the real run does.
#
# With --wheels DIR the project's wheel and any missing pure-Python dependencies are installed
# from DIR with --no-index --no-deps into OUT/.site, put first on PYTHONPATH. For a machine
# without a registry (the lent H100/H200 have torch, cupy, jax, nvidia-ml-py, psutil, rich,
# matplotlib, prometheus-client, pytest and hypothesis, but no dask), fill DIR beforehand with
#   pip wheel --no-deps -w DIR .
#   pip download --no-deps --only-binary=:all: -d DIR dask distributed cloudpickle toolz partd \
#       locket fsspec tblib sortedcontainers zict msgpack tornado click pyyaml importlib_metadata
# (msgpack, tornado and pyyaml have compiled wheels: add --python-version/--platform for the
# machine's Python).
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
DRY=0
QUICK=0
OUT=""
WHEELS=""
PY="${PYTHON:-python3}"
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) DRY=1 ;;
        --quick) QUICK=1 ;;
        --out) OUT="$2"; shift ;;
        --wheels) WHEELS="$2"; shift ;;
        --python) PY="$2"; shift ;;
        -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
        *) echo "gpu_sweep.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
OUT="${OUT:-$ROOT/gpu-sweep-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT" || { echo "gpu_sweep.sh: cannot create $OUT" >&2; exit 2; }
OUT="$(cd "$OUT" && pwd)"
LOG="$OUT/sweep.log"
exec 3>&1  # say() writes here: each step's own stdout may be redirected into a result file
: >"$OUT/steps.tsv"
cd "$ROOT"

say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG" >&3; }

# -- environment ----------------------------------------------------------------------------------
if [ -n "$WHEELS" ]; then
    SITE="$OUT/.site"
    if ! "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$WHEELS"/*.whl \
        >>"$LOG" 2>&1; then
        say "FAIL: the wheels in $WHEELS do not install (see $LOG)"
        exit 1
    fi
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
if ! "$PY" -c "import gpuprobe" 2>>"$LOG"; then
    say "FAIL: $PY cannot import gpuprobe (install the wheel, or pass --wheels DIR)"
    exit 1
fi
GP=("$PY" -m gpuprobe)

# One step: run it (or, dry, check it), record its exit code and time, never stop the sweep.
# step NAME TIMEOUT_S KIND -- ARGV...   KIND: gp (gpuprobe arguments) | py (a python script)
#                                        | cmd (any command)
step() {
    local name="$1" limit="$2" kind="$3"
    shift 4
    local t0 rc
    t0=$(date +%s)
    if [ "$DRY" = 1 ]; then
        case "$kind" in
            gp) "$PY" - "$@" <<'EOF' >>"$LOG" 2>&1
import sys
from gpuprobe.cli import build_parser
argv = sys.argv[1:]
args = build_parser().parse_args(argv)  # exits 2 with the parser's message on a bad line
assert getattr(args, "handler", None) is not None, f"no command in {argv}"
EOF
                rc=$? ;;
            py) "$PY" -m py_compile "$1" >>"$LOG" 2>&1; rc=$? ;;
            cmd) command -v "$1" >/dev/null 2>&1; rc=$? ;;
        esac
    else
        case "$kind" in
            gp) timeout "$limit" "${GP[@]}" "$@" ; rc=$? ;;
            py) timeout "$limit" "$PY" "$@" ; rc=$? ;;
            cmd) timeout "$limit" "$@" ; rc=$? ;;
        esac
    fi
    printf '%s\t%s\t%s\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" >>"$OUT/steps.tsv"
    say "$name: exit $rc in $(( $(date +%s) - t0 )) s"
    return 0
}

if [ "$DRY" = 1 ]; then
    say "dry run: checking everything but the card, into $OUT"
    # the project's wheel builds (no network: the build backend already installed here)
    WHL="$OUT/.wheel"
    if "$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$WHL" "$ROOT" >>"$LOG" 2>&1 \
        && ls "$WHL"/gpuprobe-*.whl >/dev/null 2>&1; then
        printf 'wheel\t0\t0\n' >>"$OUT/steps.tsv"; say "wheel: built $(basename "$WHL"/gpuprobe-*.whl)"
    else
        printf 'wheel\t1\t0\n' >>"$OUT/steps.tsv"; say "wheel: FAILED to build (see $LOG)"
    fi
    for f in examples/loader_workers.py examples/loader_single_process.py; do
        [ -f "$f" ] || { printf 'exists %s\t1\t0\n' "$f" >>"$OUT/steps.tsv"; say "missing $f"; }
    done
else
    say "sweep into $OUT"
    nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || say "nvidia-smi failed (see nvidia-smi.txt)"
    "$PY" -m pip list >"$OUT/pip-list.txt" 2>&1
fi

BUDGET=0.25
[ "$QUICK" = 1 ] && BUDGET=0.1

# -- the gpu-marked tests -------------------------------------------------------------------------
if [ "$DRY" = 1 ]; then
    step gpu-tests 0 cmd -- "$PY"
    "$PY" -m pytest --co -q -m gpu tests >"$OUT/gpu-tests.collect.txt" 2>&1
    printf 'gpu-tests-collect\t%s\t0\n' "$?" >>"$OUT/steps.tsv"
else
    step gpu-tests 300 cmd -- "$PY" -m pytest -q -m gpu -p no:cacheprovider \
        --junitxml="$OUT/gpu-tests.xml" tests >"$OUT/gpu-tests.txt" 2>&1
fi

# -- read the machine -----------------------------------------------------------------------------
step info 120 gp -- info --json >"$OUT/info.json" 2>>"$LOG"
step info-text 120 gp -- info >"$OUT/info.txt" 2>>"$LOG"
step doctor 300 gp -- doctor --json >"$OUT/doctor.json" 2>>"$LOG"
step doctor-from-snapshot 60 gp -- doctor --from "$OUT/info.json" >"$OUT/doctor-from-info.txt" 2>>"$LOG"

# -- measure --------------------------------------------------------------------------------------
step bench 420 gp -- bench --budget "$BUDGET" --no-save --json --plot "$OUT/bench.png" \
    >"$OUT/bench.json" 2>>"$LOG"

# -- record real jobs -----------------------------------------------------------------------------
step run-train 180 gp -- run --hz 5 --out "$OUT/run-train" --json -- "$PY" \
    examples/loader_workers.py "$OUT/trace-loader-workers.json.gz" >"$OUT/run-train.json" 2>>"$LOG"
step run-starved 180 gp -- run --hz 5 --out "$OUT/run-starved" --json -- "$PY" \
    examples/loader_single_process.py "$OUT/trace-loader-single.json.gz" \
    >"$OUT/run-starved.json" 2>>"$LOG"
for d in run-train run-starved; do
    step "plot-$d" 120 gp -- plot --out "$OUT/$d.png" "$OUT/$d" >>"$LOG" 2>&1
done

# -- traces from examples/, diagnosed -------------------------------------------------------------
for ex in item_every_step item_fixed pageable_copies pinned_copies fp32_matmul tf32_matmul; do
    step "trace-$ex" 180 py -- "examples/$ex.py" "$OUT/trace-$ex.json.gz" >>"$LOG" 2>&1
done
for pair in item_every_step:item_fixed pageable_copies:pinned_copies fp32_matmul:tf32_matmul; do
    slow="${pair%%:*}"; fixed="${pair##*:}"
    step "diagnose-$slow" 120 gp -- diagnose --json --html "$OUT/diagnose-$slow.html" \
        "$OUT/trace-$slow.json.gz" >"$OUT/diagnose-$slow.json" 2>>"$LOG"
    step "compare-$slow" 120 gp -- diagnose --compare "$OUT/trace-$slow.json.gz" \
        "$OUT/trace-$fixed.json.gz" >"$OUT/compare-$slow.txt" 2>>"$LOG"
done
step diagnose-starved 120 gp -- diagnose --json "$OUT/trace-loader-single.json.gz" \
    >"$OUT/diagnose-loader-single.json" 2>>"$LOG"

# -- memory ---------------------------------------------------------------------------------------
step fit 300 gp -- fit --device cuda --json >"$OUT/fit.json" 2>>"$LOG"
step precision 180 gp -- precision --device cuda --json >"$OUT/precision.json" 2>>"$LOG"
step pack 240 gp -- pack -n 1,2,4 --json -- "$PY" -m gpuprobe precision --device cuda \
    --dtypes fp16 --budget 0.3 --json >"$OUT/pack.json" 2>>"$LOG"

# -- scale: least squares over CuPy arrays, one Dask worker per GPU --------------------------------
SCALE_PY="$HERE/gpu_sweep_lstsq.py"
step scale 300 py -- "$SCALE_PY" --out "$OUT/scale-lstsq.json" $( [ "$DRY" = 1 ] && echo --check ) \
    >>"$LOG" 2>&1
step scale-cpu 300 gp -- scale lstsq --rows 200000 --cols 200 --workers 1,2 --json \
    --plot "$OUT/scale-lstsq-cpu.png" >"$OUT/scale-lstsq-cpu.json" 2>>"$LOG"

# -- one file to carry back -----------------------------------------------------------------------
tar -czf "$OUT.tar.gz" -C "$(dirname "$OUT")" --exclude=.site --exclude=.wheel "$(basename "$OUT")"
printf 'tar\t%s\t0\n' "$?" >>"$OUT/steps.tsv"
failed=$(awk -F'\t' '$2 != 0' "$OUT/steps.tsv" | wc -l)
say "done: $(wc -l <"$OUT/steps.tsv") steps, $failed failed; $OUT.tar.gz"
[ "$failed" = 0 ]
