"""gpuprobe's multi-rank diagnosis against Holistic Trace Analysis, side by side, same folder.

Per rank: GPU busy % (HTA ``get_temporal_breakdown``: 100 − idle_time_pctg), the share of
communication overlapped with compute (HTA ``get_comm_comp_overlap``) and HTA's launch
statistics (``get_cuda_kernel_launch_stats``: launches, short kernels, outliers by the default
cut-offs), with the difference; the kernel diff against HTA's ``TraceDiff.compare_traces``; and the wall time and peak RSS of each tool, each in its own
process (HTA: ``TraceAnalysis`` load plus those three analyses; gpuprobe: ``diagnose_ranks``, which
gives all of them per rank). Peak RSS is the process's own; HTA parses the ranks in a
multiprocessing pool, whose largest worker is reported beside it. Each tool runs ``--repeat`` times, alternating;
the median time and the largest peak RSS are reported. Goal: within 0.1 percentage point, and
less total time than HTA.

HTA lives in its own venv (``python3 -m venv /work/hta-venv && /work/hta-venv/bin/pip install
HolisticTraceAnalysis "pandas<3"``). Output: benchmarks/results/diagnose_ranks_vs_hta.{json,md}.

    python benchmarks/diagnose_ranks_vs_hta.py [--dir FOLDER ...] [--hta PYTHON] [--repeat N]

Default folders: the 8 DLRM ranks and HTA's two sampled ranks in tests/data/diagnose/; then the
DLRM ranks copied to 8, 32 and 64 ranks for time and memory against the number of ranks.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

from _pythonpath import src_first  # benchmarks/, next to this script

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TARGET_PP = 0.1  # percentage points; the accuracy goal

HTA_SCRIPT = r"""
import json, logging, os, resource, sys, time, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=True)
t1 = time.perf_counter()
tb = ta.get_temporal_breakdown(visualize=False)
ov = ta.get_comm_comp_overlap(visualize=False)
ranks = sorted(ta.t.traces)
ls = ta.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)
t2 = time.perf_counter()
out = {"load_s": t1 - t0, "analyses_s": t2 - t1, "total_s": t2 - t0, "ranks": {}}
for r in ranks:
    df = ls[r]
    out["ranks"][str(r)] = {
        "busy_pct": 100.0 - float(tb.loc[tb["rank"] == r, "idle_time_pctg"].iloc[0]),
        "overlap_pct": float(ov.loc[ov["rank"] == r, "comp_comm_overlap_pctg"].iloc[0]),
        "launches": int(len(df)),
        "short": int(((df["cpu_duration"] <= 50) & (df["gpu_duration"] < df["cpu_duration"])).sum()),
        "runtime_outliers": int((df["cpu_duration"] > 50).sum()),
        "delay_outliers": int((df["launch_delay"] > 100).sum()),
    }
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out["child_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps(out))
"""

OURS_SCRIPT = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from gpuprobe.tools.diagnose.ranks import diagnose_ranks
d = diagnose_ranks(sys.argv[1])
t1 = time.perf_counter()
out = {"diagnose_ranks_s": t1 - t0, "straggler": d.straggler, "ranks": {}}
for r in d.ranks:
    ls = r.launches
    out["ranks"][str(r.rank)] = {
        "busy_pct": 100.0 * r.gpu_busy_fraction,
        "overlap_pct": 100.0 * r.overlap_fraction,
        "launches": ls.launches,
        "short": ls.short_kernels,
        "runtime_outliers": ls.runtime_outliers,
        "delay_outliers": ls.launch_delay_outliers,
    }
out["total_s"] = time.perf_counter() - t0
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out["child_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps(out))
"""


def run(python: str, script: str, args: list[str], env: dict[str, str]) -> dict:
    """Run ``script`` with ``args`` in its own process; the JSON it prints last."""
    proc = subprocess.run(
        [python, "-c", script, *args], capture_output=True, text=True, env=env, timeout=1800
    )
    if proc.returncode != 0:
        raise SystemExit(f"{python} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compare_folder(folder: str, hta_python: str, repeat: int) -> tuple[dict, list[str]]:
    """Run both tools ``repeat`` times on ``folder``; the result and its markdown section."""
    hta_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    ours_env = src_first(ROOT / "src")
    hta_runs, our_runs = [], []
    for _ in range(repeat):
        our_runs.append(run(sys.executable, OURS_SCRIPT, [folder], ours_env))
        hta_runs.append(run(hta_python, HTA_SCRIPT, [folder], hta_env))
    hta, ours = hta_runs[-1], our_runs[-1]
    keys = ("launches", "short", "runtime_outliers", "delay_outliers")
    rows = []
    for rank in sorted(hta["ranks"], key=int):
        h, o = hta["ranks"][rank], ours["ranks"][rank]
        rows.append(
            {
                "rank": int(rank),
                "busy_hta": h["busy_pct"],
                "busy_ours": o["busy_pct"],
                "busy_diff_pp": o["busy_pct"] - h["busy_pct"],
                "overlap_hta": h["overlap_pct"],
                "overlap_ours": o["overlap_pct"],
                "overlap_diff_pp": o["overlap_pct"] - h["overlap_pct"],
                "launch_hta": [h[k] for k in keys],
                "launch_ours": [o[k] for k in keys],
            }
        )
    t_hta = statistics.median(r["total_s"] for r in hta_runs)
    t_ours = statistics.median(r["total_s"] for r in our_runs)
    rss_hta = max(r["peak_rss_mb"] for r in hta_runs)
    rss_ours = max(r["peak_rss_mb"] for r in our_runs)
    rss_hta_child = max(r["child_peak_rss_mb"] for r in hta_runs)
    rss_ours_child = max(r["child_peak_rss_mb"] for r in our_runs)
    worst = max(max(abs(r["busy_diff_pp"]), abs(r["overlap_diff_pp"])) for r in rows)
    result = {
        "folder": os.path.relpath(folder, ROOT),
        "rows": rows,
        "hta_load_s": statistics.median(r["load_s"] for r in hta_runs),
        "hta_analyses_s": statistics.median(r["analyses_s"] for r in hta_runs),
        "hta_total_s": t_hta,
        "ours_total_s": t_ours,
        "ours_diagnose_ranks_s": statistics.median(r["diagnose_ranks_s"] for r in our_runs),
        "hta_peak_rss_mb": rss_hta,
        "ours_peak_rss_mb": rss_ours,
        "hta_largest_child_rss_mb": rss_hta_child,
        "ours_largest_child_rss_mb": rss_ours_child,
        "worst_diff_pp": worst,
        "straggler": ours["straggler"],
    }
    lines = [
        f"## `{result['folder']}` ({len(rows)} ranks)",
        "",
        "| rank | busy % HTA | busy % ours | diff pp | overlap % HTA | overlap % ours | diff pp "
        "| launches, short, runtime >50 µs, delay >100 µs: HTA | ours |",
        "|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['rank']} | {r['busy_hta']:.2f} | {r['busy_ours']:.4f} | "
            f"{r['busy_diff_pp']:+.4f} | {r['overlap_hta']:.2f} | {r['overlap_ours']:.4f} | "
            f"{r['overlap_diff_pp']:+.4f} | {r['launch_hta']} | {r['launch_ours']} |"
        )
    ok = "yes" if worst <= TARGET_PP else "NO"
    faster = t_hta / t_ours if t_ours > 0 else float("inf")
    lines += [
        "",
        f"Largest difference: {worst:.4f} percentage points (goal ≤ {TARGET_PP}: {ok}). HTA "
        "rounds its percentages to 2 decimals, so differences up to 0.005 pp are HTA's rounding.",
        "",
        "| | total time (s) | peak RSS (MB) | largest child process (MB) |",
        "|---|---:|---:|---:|",
        f"| HTA: TraceAnalysis load ({result['hta_load_s']:.2f} s) + temporal breakdown, "
        f"comm/comp overlap, launch stats ({result['hta_analyses_s']:.2f} s) | {t_hta:.2f} | "
        f"{rss_hta:.0f} | {rss_hta_child:.0f} |",
        f"| gpuprobe: diagnose_ranks ({result['ours_diagnose_ranks_s']:.2f} s; busy, overlap, "
        f"launch stats per rank, straggler) | {t_ours:.2f} | {rss_ours:.0f} | "
        f"{rss_ours_child:.0f} |",
        f"| ratio HTA / gpuprobe | {faster:.1f}× | {rss_hta / rss_ours:.1f}× | |",
        "",
        f"Straggler (gpuprobe): rank {result['straggler']}.",
        "",
    ]
    return result, lines


HTA_DIFF_SCRIPT = r"""
import json, logging, resource, sys, time, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)
t0 = time.perf_counter()
from hta.trace_diff import DeviceType, TraceDiff
df = TraceDiff.compare_traces(sys.argv[1], sys.argv[2], control_iteration=int(sys.argv[3]),
                              test_iteration=int(sys.argv[3]), device_type=DeviceType.GPU)
rows = {str(n): [float(r["Control_counts"]), float(r["Test_counts"]),
                 float(r["Control_total_duration"]), float(r["Test_total_duration"])]
        for n, r in df.iterrows()}
print(json.dumps({"rows": rows, "total_s": time.perf_counter() - t0,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

OURS_DIFF_SCRIPT = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.kernel_diff import compare_kernels
from gpuprobe.tools.diagnose.kineto import read_trace
d = compare_kernels(TraceContext(read_trace(sys.argv[1])), TraceContext(read_trace(sys.argv[2])),
                    rows=10**9)  # every kernel, to compare them all
rows = {c.name: [c.count_before * d.steps_before, c.count_after * d.steps_after,
                 c.total_before_us * d.steps_before, c.total_after_us * d.steps_after]
        for c in d.changes}
print(json.dumps({"rows": rows, "total_s": time.perf_counter() - t0,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def kernel_diff_vs_hta(hta_python: str) -> tuple[dict, list[str]]:
    """HTA's TraceDiff.compare_traces (GPU kernels) and compare_kernels on the trace-diff pair."""
    import shutil
    import tempfile

    data = ROOT / "tests" / "data" / "diagnose"
    before = data / "hta_trace_diff_control_step1012.json.gz"
    after = data / "hta_trace_diff_test_step1012.json.gz"
    tmp = Path(tempfile.mkdtemp(prefix="gpuprobe-diff-"))
    try:
        for sub, f in (("control", before), ("test", after)):
            (tmp / sub).mkdir()
            shutil.copy(f, tmp / sub / f.name)
        hta_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        hta = run(
            hta_python, HTA_DIFF_SCRIPT, [str(tmp / "control"), str(tmp / "test"), "1012"], hta_env
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ours = run(
        sys.executable,
        OURS_DIFF_SCRIPT,
        [str(before), str(after)],
        src_first(ROOT / "src"),
    )
    names = set(hta["rows"]) | set(ours["rows"])
    same = sum(
        1
        for n in names
        if n in hta["rows"]
        and n in ours["rows"]
        and all(abs(x - y) < 1e-6 for x, y in zip(hta["rows"][n], ours["rows"][n], strict=True))
    )
    result = {
        "kernels": len(names),
        "identical": same,
        "hta_s": hta["total_s"],
        "ours_s": ours["total_s"],
        "hta_rss_mb": hta["peak_rss_mb"],
        "ours_rss_mb": ours["peak_rss_mb"],
    }
    lines = [
        "## Kernel diff vs HTA's TraceDiff",
        "",
        f"`{before.name}` → `{after.name}` (HTA's own trace-diff test pair, step 1012): HTA "
        "`TraceDiff.compare_traces(device_type=GPU)` against gpuprobe's `compare_kernels`, per "
        f"kernel name: {same} of {len(names)} names have the same counts and total durations "
        f"before and after in both. Time {hta['total_s']:.2f} s (HTA) vs {ours['total_s']:.2f} s "
        f"(gpuprobe), peak RSS {hta['peak_rss_mb']:.0f} MB vs {ours['peak_rss_mb']:.0f} MB.",
        "",
    ]
    return result, lines


def replicate(src: str, copies: int, dst: Path) -> str:
    """``copies`` copies of every rank in ``src`` as ranks r + n·copy (the header's rank and the
    file name rewritten, the events unchanged): a bigger job made of the same real ranks."""
    import gzip

    files = sorted(Path(src).glob("*.json.gz"))
    dst.mkdir(parents=True, exist_ok=True)
    for c in range(copies):
        for f in files:
            with gzip.open(f, "rt") as fh:
                data = json.load(fh)
            rank = int(data["distributedInfo"]["rank"]) + c * len(files)
            data["distributedInfo"] = dict(data["distributedInfo"], rank=rank)
            with gzip.open(dst / f"rank-{rank}.json.gz", "wt", compresslevel=6) as out:
                json.dump(data, out)
    return str(dst)


def scaling(src: str, hta_python: str, copies: tuple[int, ...]) -> tuple[list[dict], list[str]]:
    """Time and peak RSS of both tools on 8·copies ranks (one run each)."""
    import shutil
    import tempfile

    hta_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    ours_env = src_first(ROOT / "src")
    rows = []
    for c in copies:
        tmp = Path(tempfile.mkdtemp(prefix="gpuprobe-ranks-"))
        try:
            folder = replicate(src, c, tmp / "ranks")
            ours = run(sys.executable, OURS_SCRIPT, [folder], ours_env)
            hta = run(hta_python, HTA_SCRIPT, [folder], hta_env)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        rows.append(
            {
                "ranks": len(ours["ranks"]),
                "ours_s": ours["total_s"],
                "ours_rss_mb": ours["peak_rss_mb"],
                "hta_s": hta["total_s"],
                "hta_rss_mb": hta["peak_rss_mb"],
                "hta_child_rss_mb": hta["child_peak_rss_mb"],
            }
        )
    lines = [
        "## Scaling with the number of ranks",
        "",
        f"The 8 ranks of `{os.path.relpath(src, ROOT)}` copied as ranks 8–15, 16–23, … (header "
        "rank and file name rewritten, events unchanged); one run of each tool per size.",
        "",
        "| ranks | gpuprobe s | gpuprobe peak RSS MB | HTA s | HTA peak RSS MB (main) "
        "| HTA largest worker MB | time HTA / gpuprobe |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['ranks']} | {r['ours_s']:.2f} | {r['ours_rss_mb']:.0f} | {r['hta_s']:.2f} | "
            f"{r['hta_rss_mb']:.0f} | {r['hta_child_rss_mb']:.0f} | "
            f"{r['hta_s'] / r['ours_s']:.1f}× |"
        )
    lines.append("")
    return rows, lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data = ROOT / "tests" / "data" / "diagnose"
    ap.add_argument(
        "--dir",
        nargs="+",
        default=[str(data / "dlrm8"), str(data / "hta_sampled")],
        help="folders of one trace per rank",
    )
    ap.add_argument("--hta", default="/work/hta-venv/bin/python", help="python with HTA")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--scale",
        default="1,4,8",
        help="copies of the first folder's ranks for the scaling table ('' to skip)",
    )
    args = ap.parse_args()
    hta_version = subprocess.run(
        [
            args.hta,
            "-c",
            "import importlib.metadata as m; print(m.version("
            "'HolisticTraceAnalysis'), m.version('pandas'))",
        ],
        capture_output=True,
        text=True,
    ).stdout.split()
    machine = (
        f"{platform.node()} {platform.machine()} {os.cpu_count()} cores, "
        f"python {platform.python_version()}"
    )
    lines = [
        "# gpuprobe diagnose (several ranks) vs Holistic Trace Analysis",
        "",
        f"HTA {' / pandas '.join(hta_version)}, {machine}; each tool in its own process, "
        f"{args.repeat} runs alternating (median time, largest peak RSS); times include starting "
        "Python and importing each tool. Made by `benchmarks/diagnose_ranks_vs_hta.py`.",
        "",
    ]
    results = []
    for folder in args.dir:
        result, section = compare_folder(folder, args.hta, args.repeat)
        results.append(result)
        lines += section
    out: dict = {"hta_version": hta_version, "machine": machine, "repeat": args.repeat}
    out["folders"] = results
    out["kernel_diff"], section = kernel_diff_vs_hta(args.hta)
    lines += section
    if args.scale:
        copies = tuple(int(x) for x in args.scale.split(","))
        out["scaling"], section = scaling(args.dir[0], args.hta, copies)
        lines += section
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "diagnose_ranks_vs_hta.json").write_text(json.dumps(out, indent=2) + "\n")
    (RESULTS / "diagnose_ranks_vs_hta.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
