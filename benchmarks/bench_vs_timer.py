"""Issue 28's numbers: ``gpuprobe bench --quick``'s matmul figures against
``torch.utils.benchmark.Timer`` at the same thread count, on this machine as it is ("idle": other
sessions may be running) and with one core kept busy by a burner process (a Python loop in a
subprocess of its own), side by side in one run.

For each condition, a child process (torch on the CPU, torch's default thread count, which Timer
is given too) times float32 n = 64, 256, 512 and float64 n = 512 the way ``bench --quick`` does
(``gpuprobe.tools.bench.workloads._common.timed``: the quick budget, ``min_runs=3``) and with
``Timer.blocked_autorange``, alternating which goes first, over several rounds. Printed per
case: gpuprobe's figure (the median of the rounds' medians), Timer's, the ratio (median of the
rounds' gpuprobe / Timer, in time), how many rounds gpuprobe flagged as not trustworthy, and how
far Timer's own rounds lie apart (max / min): where that is large, Timer's figure is itself not a
reference. Then the matmul workload as ``bench --quick`` runs it: every size it skipped, and
Timer's time for that size (goal: none skipped that takes < 1 ms). The load that other processes
put on the host during each condition (``HostLoad``) is printed with it.

Run: PYTHONPATH=src .venv/bin/python benchmarks/bench_vs_timer.py [--rounds N] [--before SRC]
(``--before``: each condition also with the code under SRC, e.g. a worktree of the commit before).
Writes benchmarks/results/bench_vs_timer.{json,md}.
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
from pathlib import Path
from typing import Any

from _pythonpath import src_first  # benchmarks/, next to this script

RESULTS = Path(__file__).parent / "results"
CASES = (("float32", 64), ("float32", 256), ("float32", 512), ("float64", 512))
TOLERANCE = 0.10  # the goal: gpuprobe's figure within 10 % of Timer's
SKIP_GOAL_S = 1e-3  # the goal: no size skipped that takes less than this
TIMER_MIN_RUN_S = 0.2  # Timer.blocked_autorange's default min_run_time
BURNER = "while True: pass"


def child(rounds: int) -> dict[str, Any]:
    """In a child process: every case timed by both, alternating, ``rounds`` times; then the
    quick matmul workload and Timer's time for each size it skipped."""
    import torch
    import torch.utils.benchmark as tb

    from gpuprobe.platform.frameworks.backends import make_backend
    from gpuprobe.platform.hardware.load import HostLoad
    from gpuprobe.tools.bench.workloads import Settings, run_workload
    from gpuprobe.tools.bench.workloads._common import timed

    load = HostLoad(children=False)
    b = make_backend("torch", "cpu")
    threads = torch.get_num_threads()
    quick = Settings(quick=True)

    def timer_s(fn: Any) -> tuple[float, float]:
        """Timer's figure (the median block's time per call) and its fastest block's."""
        t = tb.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads)
        m = t.blocked_autorange(min_run_time=TIMER_MIN_RUN_S)
        return float(m.median), float(min(m.times))

    rows = []
    for dtype, n in CASES:
        a = b.cast(b.randn((n, n), seed=1), dtype)
        c = b.cast(b.randn((n, n), seed=2), dtype)

        def fn(a: Any = a, c: Any = c) -> Any:
            return b.matmul(a, c)

        ours: list[dict[str, Any]] = []
        theirs: list[float] = []
        best: list[float] = []
        for i in range(rounds):
            for turn in (0, 1) if i % 2 == 0 else (1, 0):
                if turn == 0:
                    m = timed(b, f"matmul-{dtype}", fn, quick, min_runs=3)
                    ours.append(
                        {
                            "median_s": m.median,
                            "min_s": m.min,
                            "n": m.n,
                            # getattr: the child also runs the code before issue 28 (--before)
                            "agreeing": getattr(m, "agreeing", None),
                            "trusted": getattr(m, "trusted", True),
                        }
                    )
                else:
                    med, low = timer_s(fn)
                    theirs.append(med)
                    best.append(low)
        ratios = [o["median_s"] / t for o, t in zip(ours, theirs, strict=True)]
        rows.append(
            {
                "case": f"{dtype} {n}",
                "flop": 2.0 * n**3,
                "gpuprobe_s": statistics.median(o["median_s"] for o in ours),
                "timer_s": statistics.median(theirs),
                "ratio": statistics.median(ratios),
                "untrusted_rounds": sum(not o["trusted"] for o in ours),
                "timer_spread": max(theirs) / min(theirs),
                "gpuprobe_spread": max(o["median_s"] for o in ours)
                / min(o["median_s"] for o in ours),
                "timer_best_block_s": min(best),
                "rounds_gpuprobe": ours,
                "rounds_timer_s": theirs,
            }
        )
    skipped = []
    results = list(run_workload("matmul", b, quick))
    for r in results:
        if r.status != "skipped" or r.size is None or r.size > 1024:
            continue
        a = b.cast(b.randn((r.size, r.size), seed=1), r.case)
        c = b.cast(b.randn((r.size, r.size), seed=2), r.case)
        skipped.append(
            {
                "case": f"{r.case} {r.size}",
                "reason": r.reason,
                "timer_s": timer_s(lambda a=a, c=c: b.matmul(a, c))[0],
            }
        )
    measured = [
        {
            "case": f"{r.case} {r.size}",
            "median_s": r.measurement.median,
            "trusted": getattr(r.measurement, "trusted", True),
        }
        for r in results
        if r.ok and r.measurement is not None
    ]
    return {
        "threads": threads,
        "rows": rows,
        "quick_matmul": {"skipped": skipped, "measured": measured},
        "others_cores": load.others_cores(),
        "wall_s": load.wall_s,
    }


def _run_child(rounds: int, busy: bool, src: str | None) -> dict[str, Any]:
    env = src_first(src) if src else dict(os.environ)
    burner = subprocess.Popen([sys.executable, "-c", BURNER]) if busy else None
    try:
        p = subprocess.run(
            [sys.executable, __file__, "--child", "--rounds", str(rounds)],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()
    out: dict[str, Any] = json.loads(p.stdout)
    out["condition"] = ("busy (burner on one core)" if busy else "idle (no burner)") + (
        ", code before issue 28" if src else ""
    )
    return out


def _ms(s: float) -> str:
    return f"{s * 1e3:.3f} ms"


def _markdown(res: dict[str, Any]) -> str:
    m = res["machine"]
    lines = [
        "# gpuprobe bench --quick vs torch.utils.benchmark.Timer, idle and busy",
        "",
        f"Date: {res['date']}; host: {m['cpu']} ({m['cores']} cores); Python {m['python']}; "
        f"torch {res['torch']}, {res['conditions'][0]['threads']} threads for both timers.",
        "",
        "Same matmul, same process, timed as `bench --quick` times it (gpuprobe: the quick "
        "budget, min_runs=3) and by `Timer.blocked_autorange` at the same thread count, "
        f"alternating over {res['rounds']} rounds. gpuprobe and Timer: the median of the rounds' "
        "figures; ratio: the median of the rounds' gpuprobe / Timer (time; 1 = the same); "
        "untrusted: rounds gpuprobe flagged (its runs never agreed); gpuprobe max/min and "
        "Timer max/min: how far each one's own rounds lie apart; Timer's best block: the "
        "fastest of its blocks' time per call over the rounds (a block's time is the mean of "
        "its calls, so a stall in a block counts in it), and gpuprobe's figure over it. "
        "Goal: ratio within 10 %.",
        "",
    ]
    for c in res["conditions"]:
        others = c["others_cores"]
        load = f"{others:.2f}" if others is not None else "n/a"
        lines += [
            f"## {c['condition']}: other processes kept {load} of {m['cores']} cores busy",
            "",
            "| case | gpuprobe | GFLOP/s | Timer | GFLOP/s | ratio | within 10 % | "
            "untrusted | gpuprobe max/min | Timer max/min | Timer's best block | "
            "gpuprobe / best block |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in c["rows"]:
            ok = abs(r["ratio"] - 1) <= TOLERANCE
            lines.append(
                f"| {r['case']} | {_ms(r['gpuprobe_s'])} | {r['flop'] / r['gpuprobe_s'] / 1e9:.3g} "
                f"| {_ms(r['timer_s'])} | {r['flop'] / r['timer_s'] / 1e9:.3g} | "
                f"{r['ratio']:.3f} | {'yes' if ok else 'NO'} | "
                f"{r['untrusted_rounds']}/{res['rounds']} | {r['gpuprobe_spread']:.2f} | "
                f"{r['timer_spread']:.2f} | "
                f"{_ms(r['timer_best_block_s'])} | "
                f"{r['gpuprobe_s'] / r['timer_best_block_s']:.3f} |"
            )
        q = c["quick_matmul"]
        lines.append("")
        if q["skipped"]:
            lines.append("Sizes the quick matmul skipped (Timer's time for one product):")
            lines.append("")
            for s in q["skipped"]:
                flag = " **< 1 ms**" if s["timer_s"] < SKIP_GOAL_S else ""
                lines.append(f"- {s['case']}: {_ms(s['timer_s'])}{flag} ({s['reason']})")
        else:
            lines.append("The quick matmul skipped no size.")
        untrusted = [x["case"] for x in q["measured"] if not x["trusted"]]
        lines += [
            "",
            f"Quick matmul: {len(q['measured'])} sizes measured, flagged not trustworthy: "
            f"{', '.join(untrusted) or 'none'}.",
            "",
        ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--before",
        metavar="SRC",
        help="also run each condition with the gpuprobe under SRC (a src/ folder of the code "
        "before this change), after this code's",
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.rounds)))
        return 0
    import torch

    from gpuprobe.platform.hardware.host import read_host

    srcs: list[str | None] = [None, args.before] if args.before else [None]
    conditions = [_run_child(args.rounds, busy, src) for busy in (False, True) for src in srcs]
    host = read_host()
    machine = {"cpu": host.cpu_model, "cores": host.usable_cores}
    machine["python"] = platform.python_version()
    when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    res = dict(date=when, machine=machine, torch=torch.__version__, rounds=args.rounds)
    res["conditions"] = conditions
    md = _markdown(res)
    RESULTS.mkdir(exist_ok=True)
    for suffix, text in ((".json", json.dumps(res, indent=2) + "\n"), (".md", md)):
        (RESULTS / "bench_vs_timer").with_suffix(suffix).write_text(text)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
