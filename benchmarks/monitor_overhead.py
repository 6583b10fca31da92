"""What watching costs: the sampler's own CPU, and the slowdown ``gpuprobe run`` adds to a
CPU-bound command.

1. Sampler CPU at 2 Hz and 20 Hz, as % of one core, two ways: the sampler's own count
   (``time.thread_time()`` per tick, what ``gpuprobe run`` reports) and this process's
   ``getrusage`` over the same window while the main thread only waits (an outside check).
2. Slowdown: a CPU-bound command (pure-Python loops, one per core, timing its own work) run
   alone and under ``gpuprobe run --hz 2 --no-report``, alternated A B A B in one run; the ratio
   is taken pair by pair and the median quoted, so drifts in machine speed cancel. Also the
   whole-process wall ratio (Python start-up and imports included) and the time to draw the
   report afterwards.

Usage: ``PYTHONPATH=src python benchmarks/monitor_overhead.py [--quick] [--gpu-child]
[--sampler-only] [--out FILE]``; writes ``benchmarks/results/monitor_overhead.json`` (or ``--out``)
and prints a table. ``--gpu-child`` makes the watched process a torch loop on the GPU, so that
every tick also reads that GPU and its process list through NVML (the GPU sweep's figure: the
sampler's cost at 2 Hz with a GPU).

Each sampler run also says where its CPU went: ``parts_cpu_ms_per_sample`` (host, process tree,
GPU reads; the sink is the rest) and ``nvml_call_ms`` (per NVML entry point, and the process-name
lookups: calls, wall ms, CPU ms, costliest first), so a run on a card names the expensive call.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
sys.path.insert(0, str(SRC))

from gpuprobe.tools.monitor.sampler import Sampler  # noqa: E402

TOP_CALLS = 6  # NVML call kinds printed per rate (all are in the JSON)

# N processes, each spinning a fixed number of iterations; prints the slowest one's seconds.
WORK = r"""
import multiprocessing as mp, sys, time
def spin(n):
    t = time.perf_counter()
    x = 0
    for i in range(n):
        x += i * i
    return time.perf_counter() - t
if __name__ == "__main__":
    procs, n = int(sys.argv[1]), int(sys.argv[2])
    t = time.perf_counter()
    with mp.Pool(procs) as pool:
        pool.map(spin, [n] * procs)
    print(time.perf_counter() - t)
"""


# The watched process of --gpu-child: matrix products on the GPU for the given seconds.
GPU_CHILD = r"""
import sys, time, torch
x = torch.randn(4096, 4096, device="cuda")
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    for _ in range(20):
        y = x @ x
    torch.cuda.synchronize()
"""


def sampler_cost(hz: float, seconds: float, gpu_child: bool = False) -> dict[str, Any]:
    if gpu_child:
        child = subprocess.Popen([sys.executable, "-c", GPU_CHILD, str(seconds)])
        time.sleep(min(3.0, seconds / 3))  # the child's CUDA context exists before the watch
    else:
        child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    w0 = time.monotonic()
    with Sampler(hz=hz, pid=child.pid) as s:
        n = 0

        def sink(_: object) -> None:
            nonlocal n
            n += 1

        s.start(sink)
        child.wait()
        s.stop()
        if child.returncode:
            raise SystemExit(
                f"monitor_overhead: the watched process exited {child.returncode}"
                + (" (--gpu-child needs torch and a GPU)" if gpu_child else "")
            )
        wall = s.wall_s()
        own = s.cpu_s
        missed = s.missed
        parts = dict(s.parts_cpu_s)
        calls = s.nvml_call_costs()
    w1 = time.monotonic()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    proc_cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {
        "hz": hz,
        "seconds": round(wall, 2),
        "samples": n,
        "missed_ticks": missed,
        "sampler_cpu_percent_of_core": round(100 * own / wall, 3),
        "process_cpu_percent_of_core": round(100 * proc_cpu / (w1 - w0), 3),
        "cpu_ms_per_sample": round(1000 * own / max(n, 1), 3),
        "gpus": len(s.gpus),
        "parts_cpu_ms_per_sample": {k: round(1000 * v / max(n, 1), 3) for k, v in parts.items()},
        "nvml_call_ms": calls,
    }


def _env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(SRC), e.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return e


def _timed(argv: list[str]) -> tuple[float, float]:
    """(the command's own work seconds, the whole process's wall seconds)."""
    t = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, env=_env(), check=True)
    wall = time.perf_counter() - t
    work = float(out.stdout.strip().splitlines()[-1])
    return work, wall


def slowdown(procs: int, n: int, pairs: int) -> dict[str, object]:
    cmd = [sys.executable, "-c", WORK, str(procs), str(n)]
    boot = (
        "import sys, gpuprobe.cli as c; c.COMMANDS = ('run',); sys.argv[0] = 'gpuprobe'; "
        "sys.exit(c.main())"
    )
    ratios_work, ratios_wall, plain, watched = [], [], [], []
    _timed(cmd)  # warm-up: page cache, CPU frequency
    with tempfile.TemporaryDirectory() as d:
        for i in range(pairs):
            a = _timed(cmd)
            b = _timed(
                [
                    sys.executable,
                    "-c",
                    boot,
                    "run",
                    "--hz",
                    "2",
                    "--no-report",
                    "--out",
                    f"{d}/r{i}",
                    "--",
                    *cmd,
                ]
            )
            plain.append(a)
            watched.append(b)
            ratios_work.append(b[0] / a[0])
            ratios_wall.append(b[1] / a[1])
        # the report, drawn from the last recording (what `gpuprobe run` adds after the command)
        t = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-c",
                boot.replace("('run',)", "('plot',)"),
                "plot",
                f"{d}/r{pairs - 1}",
            ],
            capture_output=True,
            env=_env(),
            check=True,
        )
        report_s = time.perf_counter() - t
    return {
        "processes": procs,
        "iterations": n,
        "pairs": pairs,
        "work_s_plain_median": round(statistics.median(x[0] for x in plain), 3),
        "work_s_watched_median": round(statistics.median(x[0] for x in watched), 3),
        "work_ratio_median": round(statistics.median(ratios_work), 4),
        "work_ratio_min": round(min(ratios_work), 4),
        "work_ratio_max": round(max(ratios_work), 4),
        "wall_ratio_median": round(statistics.median(ratios_wall), 4),
        "report_s": round(report_s, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter runs (a smoke test)")
    ap.add_argument("--gpu-child", action="store_true", help="watch a torch loop on the GPU")
    ap.add_argument("--sampler-only", action="store_true", help="skip the slowdown pairs")
    ap.add_argument("--out", type=Path, help="where to write the JSON (default: results/)")
    args = ap.parse_args()
    q = args.quick
    g = args.gpu_child
    cores = os.cpu_count() or 1
    result = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": cores,
            "python": platform.python_version(),
            "loadavg_start": os.getloadavg(),
        },
        "watched": "a torch loop on the GPU" if g else "a sleeping process",
        "sampler": [
            sampler_cost(2.0, 5 if q else 30, g),
            sampler_cost(20.0, 3 if q else 15, g),
        ],
        "slowdown": []
        if args.sampler_only
        else [
            slowdown(1, 2_000_000 if q else 15_000_000, 2 if q else 7),
            slowdown(cores, 2_000_000 if q else 15_000_000, 2 if q else 7),
        ],
    }
    result["machine"]["loadavg_end"] = os.getloadavg()
    out = args.out or HERE / "results" / "monitor_overhead.json"
    if args.out or not q:
        out.write_text(json.dumps(result, indent=1) + "\n")
    gpus = result["sampler"][0]["gpus"]
    print(f"sampler ({gpus} GPU(s) read per tick; watching {result['watched']})")
    for s in result["sampler"]:
        print(
            f"  {s['hz']:>4} Hz: {s['sampler_cpu_percent_of_core']:.3f} % of one core "
            f"(process check {s['process_cpu_percent_of_core']:.3f} %), "
            f"{s['cpu_ms_per_sample']:.2f} ms CPU per sample, {s['samples']} samples, "
            f"{s['missed_ticks']} missed"
        )
        parts = s["parts_cpu_ms_per_sample"]
        print("    CPU ms per sample: " + ", ".join(f"{k} {v:.3f}" for k, v in parts.items()))
        for name, c in list(s["nvml_call_ms"].items())[:TOP_CALLS]:
            per = c["cpu_ms"] / max(s["samples"], 1)
            print(f"    {name[:40]:<40} {c['calls']:>5} calls {per:7.3f} ms CPU/sample")
    if result["slowdown"]:
        print("slowdown of a CPU-bound command under `gpuprobe run --hz 2` (median of pair ratios)")
    for s in result["slowdown"]:
        print(
            f"  {s['processes']} process(es): work {s['work_ratio_median']:.4f} "
            f"(min {s['work_ratio_min']:.4f}, max {s['work_ratio_max']:.4f}; "
            f"{s['work_s_plain_median']} s alone), whole process {s['wall_ratio_median']:.4f}, "
            f"report drawn in {s['report_s']} s"
        )
    if args.out or not q:
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
