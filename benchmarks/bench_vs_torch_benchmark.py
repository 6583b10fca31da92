"""Issue 3's numbers: is ``gpuprobe bench``'s timer as good as the references, side by side?

On the CPU, for NumPy and for torch (each in its own child process, as ``gpuprobe bench`` runs
them), the same operations timed by gpuprobe's timer (``gpuprobe.platform.timing.measure``, which
every workload uses) and by ``torch.utils.benchmark.Timer.blocked_autorange``, alternating A/B then
B/A over several rounds; target: the medians within 5 %. Operations: E1's expression in float64
and float32, E8's scale, matmul at a few sizes, a host memory copy.

On a GPU (when torch sees one): the anchors of ``gpu_anchors.py`` (device-to-device copy vs a
plain torch copy ≥ 95 %, bf16 8192³ GEMM vs torch's best ≥ 97 %, launch latency vs
``triton.testing.do_bench`` within 10 %, pinned host→device vs torch within 5 %).

Also the wall time of ``gpuprobe bench --quick`` on this machine (target < 60 s without a GPU).

Run: PYTHONPATH=src .venv/bin/python benchmarks/bench_vs_torch_benchmark.py [--rounds N]
Writes benchmarks/results/bench_vs_torch_benchmark.{json,md}.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
CPU_TOLERANCE = 0.05  # medians within 5 %
QUICK_TARGET_S = 60.0


def _ops(fw: str) -> list[tuple[str, Callable[[], Any]]]:
    """The operations, built on the gpuprobe backend for ``fw`` on the CPU."""
    from gpuprobe.platform.frameworks.backends import make_backend

    b = make_backend(fw, "cpu")
    ops: list[tuple[str, Callable[[], Any]]] = []
    x64 = b.random((2000, 2000), "float64")
    x32 = b.cast(x64, "float32")
    ops.append(("expression float64 2000²", lambda: b.e1(x64)))
    ops.append(("expression float32 2000²", lambda: b.e1(x32)))
    v = b.random((50_000_000,), "float32")
    ops.append(("scale 50M float32 × 2", lambda: v * 2))
    for n in (256, 1024):
        a, c = b.randn((n, n), seed=1), b.randn((n, n), seed=2)
        ops.append((f"matmul float32 {n}³", lambda a=a, c=c: b.matmul(a, c)))
    a64, c64 = (
        b.cast(b.randn((1024, 1024), seed=1), "float64"),
        b.cast(b.randn((1024, 1024), seed=2), "float64"),
    )
    ops.append(("matmul float64 1024³", lambda: b.matmul(a64, c64)))
    copy = b.copier("host", 64 * 2**20)
    assert copy is not None
    ops.append(("host copy 64 MiB", copy))
    return ops


def cpu_child(fw: str, rounds: int, budget: float) -> dict[str, Any]:
    """In a child process: each op timed by both timers, alternating, ``rounds`` times."""
    import torch
    import torch.utils.benchmark as tb

    from gpuprobe.platform.frameworks.backends import make_backend
    from gpuprobe.platform.timing import measure

    b = make_backend(fw, "cpu")
    threads = torch.get_num_threads()
    rows = []
    for name, fn in _ops(fw):
        ours: list[float] = []
        theirs: list[float] = []

        def run_ours(
            fn: Callable[[], Any] = fn, name: str = name, ours: list[float] = ours
        ) -> None:
            ours.append(measure(name, fn, b, budget_s=budget, min_runs=5).median)

        def run_theirs(fn: Callable[[], Any] = fn, theirs: list[float] = theirs) -> None:
            t = tb.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads)
            theirs.append(t.blocked_autorange(min_run_time=budget).median)

        for i in range(rounds):
            first, second = (run_ours, run_theirs) if i % 2 == 0 else (run_theirs, run_ours)
            first()
            second()
        o, t = statistics.median(ours), statistics.median(theirs)
        # each round's two timings ran back to back: their ratio cancels the machine's slow drift
        paired = statistics.median(x / y for x, y in zip(ours, theirs, strict=True))
        rows.append(
            {
                "op": name,
                "gpuprobe_s": o,
                "torch_benchmark_s": t,
                "ratio": paired,
                "ratio_of_medians": o / t,
                "within_5pct": abs(paired - 1) <= CPU_TOLERANCE,
                "rounds_gpuprobe_s": ours,
                "rounds_torch_benchmark_s": theirs,
            }
        )
    return {"framework": fw, "environment": b.environment(), "rows": rows}


def gpu_section() -> dict[str, Any] | None:
    """The GPU comparisons (``gpu_anchors.py``, issue 14's goals), when torch sees a GPU."""
    import torch

    if not torch.cuda.is_available():
        return None
    sys.path.insert(0, str(Path(__file__).parent))
    import gpu_anchors

    return gpu_anchors.run(rounds=3)


def quick_wall() -> dict[str, Any]:
    """Wall time of ``gpuprobe bench --quick`` (numpy + torch here), in a scratch data dir."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as d:
        env["GPUPROBE_DATA_DIR"] = d
        t0 = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-m", "gpuprobe", "bench", "--quick", "--json"],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        wall = time.perf_counter() - t0
    data = json.loads(p.stdout) if p.returncode in (0, 1) and p.stdout else {}
    return {
        "wall_s": wall,
        "exit_code": p.returncode,
        "backends": sorted({f"{w['framework']} {w['device']}" for w in data.get("workers", [])}),
        "results": len(data.get("results", [])),
        "target_s": QUICK_TARGET_S,
    }


def _markdown(res: dict[str, Any]) -> str:
    lines = [
        "# gpuprobe bench vs torch.utils.benchmark (and the GPU references)",
        "",
        f"Date: {res['date']}; host: {res['machine']['cpu']} ({res['machine']['cores']} cores); "
        f"Python {res['machine']['python']}; GPU: {res['gpu']['device'] if res['gpu'] else 'none'}.",
        "",
        "Same operation, same process, timed by gpuprobe's timer and by "
        "`torch.utils.benchmark.Timer.blocked_autorange`, alternating A/B and B/A over "
        f"{res['rounds']} rounds; times are the median of the rounds' medians; ratio = "
        "gpuprobe / torch (time), the median of the per-round ratios (each round's pair ran back "
        "to back, which cancels the shared machine's drift). Target: within 5 %.",
        "",
        "| framework | operation | gpuprobe | torch.utils.benchmark | ratio | within 5 % |",
        "|---|---|---|---|---|---|",
    ]
    for block in res["cpu"]:
        for r in block["rows"]:
            lines.append(
                f"| {block['framework']} | {r['op']} | {r['gpuprobe_s'] * 1e3:.3f} ms | "
                f"{r['torch_benchmark_s'] * 1e3:.3f} ms | {r['ratio']:.3f} | "
                f"{'yes' if r['within_5pct'] else 'NO'} |"
            )
    lines.append("")
    for block in res["cpu"]:
        e = block["environment"]
        lines.append(
            f"- {block['framework']} {e.get('version')}: BLAS {e.get('blas')}, "
            f"{e.get('threads')} threads"
        )
    q = res["quick"]
    lines += [
        "",
        f"`gpuprobe bench --quick` ({', '.join(q['backends'])}, {q['results']} results): "
        f"**{q['wall_s']:.1f} s** wall (target < {q['target_s']:.0f} s), exit code {q['exit_code']}.",
        "",
    ]
    if res["gpu"]:
        g = res["gpu"]
        lines += ["## GPU", "", "```", json.dumps(g, indent=2), "```"]
    else:
        lines += [
            "## GPU",
            "",
            "No GPU on this machine: the GPU anchors (benchmarks/gpu_anchors.py: d2d ≥ 95 % of "
            "a plain torch copy, bf16 8192³ ≥ 97 % of torch's best, launch within 10 % of "
            "triton's do_bench, pinned host→device within 5 % of torch) were not run. The "
            "script runs them wherever torch sees a GPU.",
        ]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--budget", type=float, default=0.4, help="seconds per timing")
    ap.add_argument("--child", metavar="FRAMEWORK", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(cpu_child(args.child, args.rounds, args.budget)))
        return 0
    cpu = []
    for fw in ("numpy", "torch"):
        p = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                fw,
                "--rounds",
                str(args.rounds),
                "--budget",
                str(args.budget),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        cpu.append(json.loads(p.stdout))
    gpu = gpu_section()
    quick = quick_wall()
    from gpuprobe.platform.hardware.host import read_host

    host = read_host()
    res = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cpu": host.cpu_model,
            "cores": host.usable_cores,
            "python": platform.python_version(),
            "hostname": host.hostname,
        },
        "rounds": args.rounds,
        "budget_s": args.budget,
        "cpu": cpu,
        "gpu": gpu,
        "quick": quick,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_vs_torch_benchmark.json").write_text(json.dumps(res, indent=2) + "\n")
    md = _markdown(res)
    (RESULTS / "bench_vs_torch_benchmark.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
