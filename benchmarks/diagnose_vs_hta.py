"""gpuprobe diagnose against Holistic Trace Analysis (HTA, PyPI ``traceinsight``), same traces.

1. Accuracy: on synthetic multi-step GPU traces built to the Kineto schema, the whole-trace GPU
   idle fraction (HTA ``get_temporal_breakdown``) and the idle split into host wait / kernel wait /
   other (HTA ``get_idle_time_breakdown``, summed over streams) from both tools; goal: within
   1 percentage point. HTA runs twice: with its default ns rounding (ts rounded up, end rounded
   down, to whole µs) and with ``HTA_DISABLE_NS_ROUNDING=1`` (the trace's own times, as we use).
2. Speed and memory: wall time and peak RSS (``/usr/bin/time``) to diagnose a ~200 MB and a ~1 GB
   trace, each tool in its own process; goal: ≥ 5× faster than HTA, peak RSS < 2× the file size.

HTA lives in its own venv (default /tmp/hta-venv: ``python -m venv /tmp/hta-venv &&
/tmp/hta-venv/bin/pip install traceinsight==0.6.1``). The big traces are written to /tmp and
deleted afterwards (use --keep to keep them). Output: benchmarks/results/diagnose_vs_hta.{json,md}.

    PYTHONPATH=src:. python benchmarks/diagnose_vs_hta.py [--sizes 200,1000] [--skip-hta-above MB]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _pythonpath import src_first  # benchmarks/, next to this script

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.trace.traces import GEMM_TF32, SCENARIOS, SMALL  # noqa: E402

from gpuprobe.tools.diagnose.engine import diagnose  # noqa: E402
from gpuprobe.tools.diagnose.synthetic import KinetoBuilder  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
ACCURACY_SCENARIOS = (
    "multi_stream",
    "launch_bound",
    "sync_every_step",
    "input_bound",
    "pageable",
    "healthy",
    "contiguous",
)
TARGET_PP = 1.0  # percentage points; the accuracy goal
TARGET_SPEEDUP = 5.0  # × faster than HTA; the goal
TARGET_RSS_RATIO = 2.0  # peak RSS / file size; the goal

HTA_SCRIPT = r"""
import json, logging, os, sys, time
logging.disable(logging.CRITICAL)
path = sys.argv[1]
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_files={0: os.path.basename(path)}, trace_dir=os.path.dirname(path),
                   include_last_profiler_step=True)
tb = ta.get_temporal_breakdown(visualize=False)
ib, _ = ta.get_idle_time_breakdown(visualize=False)
cats = ib.groupby("idle_category")["idle_time"].sum().to_dict()
total = sum(cats.values())
print(json.dumps({
    "idle_pct": float(tb["idle_time_pctg"].iloc[0]),
    "idle_us": float(tb["idle_time(us)"].iloc[0]),
    "span_us": float(tb["kernel_time(us)"].iloc[0]),
    "split_pct": {k: 100.0 * v / total if total else 0.0 for k, v in cats.items()},
    "seconds": time.perf_counter() - t0,
}))
"""


def run_hta(
    python: str, path: str, rounding: bool, mem_limit_kb: int | None = None, timeout: float = 3600.0
) -> dict:
    """HTA in its venv; with /usr/bin/time for wall time and peak RSS."""
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    env.pop("PYTHONPATH", None)
    if not rounding:
        env["HTA_DISABLE_NS_ROUNDING"] = "1"
    cmd = ["/usr/bin/time", "-f", "TIME %e %M %U %S", python, "-c", HTA_SCRIPT, path]
    if mem_limit_kb:
        cmd = ["prlimit", f"--as={mem_limit_kb * 1024}", *cmd]
    # its own session, so that a timeout ends HTA itself, not only /usr/bin/time
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"error": f"timed out after {timeout:.0f} s"}
    return _parse(subprocess.CompletedProcess(cmd, proc.returncode, out, err), "HTA")


def run_ours(path: str) -> dict:
    code = (
        "import json, sys, time; t=time.perf_counter(); import gpuprobe.tools.diagnose.engine as g; "
        "s = g.diagnose(sys.argv[1]).summary; "
        "print(json.dumps({'seconds': time.perf_counter()-t, 'read_seconds': s.read_seconds, "
        "'events': s.events}))"
    )
    env = src_first(ROOT / "src")
    p = subprocess.run(
        ["/usr/bin/time", "-f", "TIME %e %M %U %S", sys.executable, "-c", code, path],
        capture_output=True,
        text=True,
        env=env,
    )
    return _parse(p, "gpuprobe")


def _parse(p: subprocess.CompletedProcess, who: str) -> dict:
    lines = p.stderr.strip().splitlines()
    timing = next((ln for ln in reversed(lines) if ln.startswith("TIME ")), None)
    out: dict = {}
    if timing:
        _, wall, rss, user, system = timing.split()
        out.update(
            wall_s=float(wall),
            peak_rss_mb=int(rss) / 1024,
            cpu_s=round(float(user) + float(system), 2),
        )
    if p.returncode != 0:
        tail = [ln for ln in lines if not ln.startswith("TIME ")][-3:]
        out["error"] = f"{who} exited {p.returncode}: " + " | ".join(tail)[-400:]
        return out
    out.update(json.loads(p.stdout.strip().splitlines()[-1]))
    return out


def accuracy(python: str, tmp: Path) -> list[dict]:
    rows = []
    for name in ACCURACY_SCENARIOS:
        path = SCENARIOS[name](str(tmp / f"{name}.json.gz"))
        s = diagnose(path).summary
        ours_idle = 100.0 * (s.gpu_idle_fraction or 0.0)
        ours_split = {
            "host_wait": 100.0 * (s.host_wait_fraction or 0.0),
            "kernel_wait": 100.0 * (s.kernel_wait_fraction or 0.0),
            "other": 100.0 * (s.other_wait_fraction or 0.0),
        }
        row: dict = {
            "scenario": name,
            "gpuprobe_idle_pct": round(ours_idle, 3),
            "gpuprobe_split_pct": {k: round(v, 3) for k, v in ours_split.items()},
        }
        for label, rounding in (("hta_exact", False), ("hta_default", True)):
            h = run_hta(python, path, rounding)
            if "error" in h:
                row[label] = {"error": h["error"]}
                continue
            # the split compared as shares of the GPU span (category share × idle share), so a
            # category of a near-zero idle time cannot dominate the difference
            diffs = [abs(h["idle_pct"] - ours_idle)] + [
                abs(h["split_pct"].get(k, 0.0) * h["idle_pct"] - v * ours_idle) / 100.0
                for k, v in ours_split.items()
            ]
            row[label] = {
                "idle_pct": round(h["idle_pct"], 3),
                "split_pct": {k: round(v, 3) for k, v in h["split_pct"].items()},
                "max_diff_pp": round(max(diffs), 3),
            }
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def big_trace(path: str, target_mb: int) -> dict:
    """A Kineto-schema trace of about ``target_mb`` MB: many steps of launches, copies, syncs."""
    target = target_mb * 1_000_000
    steps = 0
    t0 = time.perf_counter()
    with KinetoBuilder.open(path) as b:
        while True:
            with b.step(steps):
                b.dataloader(300.0)
                b.memcpy(nbytes=4 << 20, gpu_us=120.0, pinned=False)
                for k in range(60):
                    b.launch(
                        SMALL if k % 4 else GEMM_TF32,
                        kernel_us=3.0 if k % 4 else 90.0,
                        op="aten::mm" if k % 4 == 0 else "aten::add",
                    )
                b.item()
                b.cpu(80.0)
            steps += 1
            if steps % 50 == 0 and os.path.getsize(path) >= target:
                break
    return {
        "steps": steps,
        "bytes": os.path.getsize(path),
        "seconds_to_write": round(time.perf_counter() - t0, 1),
    }


def performance(
    python: str,
    sizes: list[int],
    tmp: Path,
    skip_hta_above: int,
    keep: bool,
    hta_mem_limit_mb: int,
    hta_timeout: float = 3600.0,
) -> list[dict]:
    rows = []
    for mb in sizes:
        path = str(tmp / f"big_{mb}MB.json")
        info = big_trace(path, mb)
        print(f"wrote {path}: {info}", flush=True)
        ours = run_ours(path)
        row = {
            "target_mb": mb,
            "file_mb": round(info["bytes"] / 1e6, 1),
            "steps": info["steps"],
            "gpuprobe": ours,
        }
        if ours.get("peak_rss_mb"):
            row["gpuprobe_rss_over_file"] = round(ours["peak_rss_mb"] * 2**20 / info["bytes"], 3)
        if mb > skip_hta_above:
            row["hta"] = {"error": f"not run: above --skip-hta-above {skip_hta_above} MB"}
        else:
            row["hta"] = run_hta(
                python, path, True, mem_limit_kb=hta_mem_limit_mb * 1024, timeout=hta_timeout
            )
            if "wall_s" in row["hta"] and "error" not in row["hta"] and ours.get("wall_s"):
                row["speedup"] = round(row["hta"]["wall_s"] / ours["wall_s"], 2)
                row["speedup_cpu"] = round(row["hta"]["cpu_s"] / ours["cpu_s"], 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if not keep:
            os.remove(path)
    return rows


def markdown(result: dict) -> str:
    out = [
        "# gpuprobe diagnose vs HTA (traceinsight)",
        "",
        f"Machine: {result['machine']}. Run: {result['when']}. HTA: {result['hta_version']}.",
        "",
        "## Accuracy (percentage points; goal ≤ 1 pp)",
        "",
        "Idle % is of the GPU span (first to last GPU activity of the steps); host/kernel/other "
        "are HTA's categories as % of the idle time, summed over streams; max diff compares "
        "idle % and each category as % of the span. 'exact': HTA_DISABLE_NS_ROUNDING=1; "
        "'default': HTA rounds each event's start up and end down to whole µs.",
        "",
        "| scenario | gpuprobe idle % | HTA idle % (exact / default rounding) "
        "| gpuprobe host/kernel/other % | HTA exact host/kernel/other % "
        "| max diff exact | max diff default |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["accuracy"]:
        ex, de = r.get("hta_exact", {}), r.get("hta_default", {})

        def split(d: dict) -> str:
            s = d.get("split_pct", {})
            return "/".join(f"{s.get(k, 0.0):.2f}" for k in ("host_wait", "kernel_wait", "other"))

        out.append(
            f"| {r['scenario']} | {r['gpuprobe_idle_pct']:.2f} | {ex.get('idle_pct', 'err')} / "
            f"{de.get('idle_pct', 'err')} | {split({'split_pct': r['gpuprobe_split_pct']})} | "
            f"{split(ex)} | {ex.get('max_diff_pp', ex.get('error'))} | "
            f"{de.get('max_diff_pp', de.get('error'))} |"
        )
    out += [
        "",
        "## Speed and peak memory (goal: ≥ 5× faster than HTA, peak RSS < 2× file)",
        "",
        "Wall time is what a user waits on this shared machine; CPU time (user + system) is less "
        "sensitive to other jobs on it.",
        "",
        "| file | steps | gpuprobe wall s (CPU s) | gpuprobe peak RSS MB | RSS / file "
        "| HTA wall s (CPU s) | HTA peak RSS MB | speed-up wall (CPU) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["performance"]:
        g, h = r["gpuprobe"], r["hta"]
        hta_wall = (
            h.get("wall_s", "–") if "error" not in h else f"{h.get('wall_s', '–')} ({h['error']})"
        )
        out.append(
            f"| {r['file_mb']} MB | {r['steps']} | {g.get('wall_s')} ({g.get('cpu_s')}) | "
            f"{g.get('peak_rss_mb', 0):.0f} | {r.get('gpuprobe_rss_over_file')} | "
            f"{hta_wall} ({h.get('cpu_s', '–')}) | {h.get('peak_rss_mb', 0):.0f} | "
            f"{r.get('speedup', '–')} ({r.get('speedup_cpu', '–')}) |"
        )
    notes = result.get("notes", [])
    if notes:
        out += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hta-python", default="/tmp/hta-venv/bin/python")
    ap.add_argument("--sizes", default="200,1000", help="trace sizes in MB, comma-separated")
    ap.add_argument("--skip-hta-above", type=int, default=10_000, metavar="MB")
    ap.add_argument(
        "--hta-mem-limit-mb",
        type=int,
        default=16_000,
        help="address-space cap for HTA (protects a shared machine)",
    )
    ap.add_argument("--no-accuracy", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the big traces in /tmp")
    ap.add_argument(
        "--hta-timeout",
        type=float,
        default=3600.0,
        metavar="S",
        help="give up on HTA after this many seconds per big trace",
    )
    ap.add_argument(
        "--append",
        action="store_true",
        help="add these rows to the existing results (e.g. the 1 GB run later)",
    )
    ap.add_argument("--render", metavar="JSON", help="only re-render the markdown from a result")
    args = ap.parse_args()
    if args.render:
        text = markdown(json.loads(Path(args.render).read_text()))
        (RESULTS / "diagnose_vs_hta.md").write_text(text)
        print(text)
        return 0
    ver = subprocess.run(
        [args.hta_python, "-c", "import importlib.metadata as m; print(m.version('traceinsight'))"],
        capture_output=True,
        text=True,
    )
    with tempfile.TemporaryDirectory(prefix="gpuprobe-bench-", dir="/tmp") as d:
        tmp = Path(d)
        result = {
            "machine": f"{platform.node()} {os.cpu_count()} CPUs, "
            f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB,"
            f" Python {platform.python_version()}",
            "when": time.strftime("%Y-%m-%d %H:%M"),
            "hta_version": ver.stdout.strip() or ver.stderr.strip()[-200:],
            "accuracy": [] if args.no_accuracy else accuracy(args.hta_python, tmp),
            "performance": performance(
                args.hta_python,
                [int(x) for x in args.sizes.split(",") if x],
                tmp,
                args.skip_hta_above,
                args.keep,
                args.hta_mem_limit_mb,
                args.hta_timeout,
            ),
        }
    old = RESULTS / "diagnose_vs_hta.json"
    if args.append and old.is_file():
        prev = json.loads(old.read_text())
        result["accuracy"] = result["accuracy"] or prev.get("accuracy", [])
        result["performance"] = prev.get("performance", []) + result["performance"]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "diagnose_vs_hta.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "diagnose_vs_hta.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
