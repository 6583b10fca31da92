"""A job's ranks read one after the other, on two local cores and on a Dask cluster, side by
side in one run (issue 42).

The job is built from a real rank: DLRM's rank 0 (tests/data/diagnose/dlrm8, V100, NCCL, from
facebookresearch/param), its one profiled step repeated ``--steps`` times per rank (3.2 MB of
JSON per rank at 4 steps: small, because this machine has 2 cores and each size is read four
times), kernel durations varied per rank (±1 %, seeded), and one straggler planted with a known
cause: on rank ``N // 3`` every step starts with an input wait of ``--wait-ms`` (its
``enumerate(DataLoader)`` span is that much longer and everything after it in the step comes
that much later, so its GPU idles), while every other rank waits as long in the step's first
NCCL kernel. The straggler is named when ``diagnose_ranks`` names that rank and its finding
says its GPU idles longer per step (the host side: the input pipeline).

Each reading runs in a process of its own, so its peak resident memory (the client's) is its
own: ``jobs=1`` (the sequential reading), ``jobs=2`` (two reader processes; their peaks are
the readers'), and ``cluster=`` a scheduler and two single-thread ``dask worker`` processes
started here (their peaks are the workers'). Output: benchmarks/results/
diagnose_ranks_parallel.{json,md}.

    python benchmarks/diagnose_ranks_parallel.py [--sizes 8,64,1024] [--steps 4] [--keep DIR]
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _pythonpath import src_first  # benchmarks/, next to this script

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SOURCE = ROOT / "tests/data/diagnose/dlrm8/worker0_step_12.1694128201545.pt.trace.json.gz"
SCALING_GOAL = 1.8  # × from one reader to two (issue 42)
DATALOADER = "enumerate(DataLoader)"

RUN = r"""
import json, resource, sys, time
from gpuprobe.tools.diagnose.ranks import diagnose_ranks
from gpuprobe.tools.diagnose.ranks_read import peak_rss_mib
how = json.loads(sys.argv[2])
t0 = time.perf_counter()
d = diagnose_ranks(sys.argv[1], **how)
s = time.perf_counter() - t0
f = d.finding("straggler")
print(json.dumps({
    "seconds": s, "ranks": len(d.ranks), "unread": len(d.unread), "straggler": d.straggler,
    "straggler_title": f.title if f else "", "straggler_fix": f.fix if f else "",
    "evidence": {e.name: e.value for e in (f.evidence if f else ())},
    "client_peak_mib": peak_rss_mib(),
    "readers": [r.to_dict() for r in d.readers], "read_on": d.read_on,
    "client_cpu_s": sum(resource.getrusage(resource.RUSAGE_SELF)[:2]),
}))
"""


def _shift(events: list[dict[str, Any]], after: float, by: float) -> None:
    for e in events:
        if "ts" in e and float(e["ts"]) > after:
            e["ts"] = float(e["ts"]) + by


def build_job(folder: Path, n: int, steps: int, wait_us: float, seed: int = 42) -> int:
    """``n`` ranks in ``folder`` (module docstring); the straggler's rank."""
    with gzip.open(SOURCE) as f:
        src = json.load(f)
    base = src["traceEvents"]
    timed = [e for e in base if "ts" in e and e.get("ph") == "X"]
    t_min = min(float(e["ts"]) for e in timed)
    span = max(float(e["ts"]) + float(e.get("dur", 0)) for e in timed) - t_min + 500.0
    straggler = n // 3
    for r in range(n):
        rng = random.Random(seed * 100_003 + r)
        events: list[dict[str, Any]] = [e for e in base if "ts" not in e]
        for k in range(steps):
            offset = k * (span + wait_us)
            step = copy.deepcopy([e for e in base if "ts" in e])
            for e in step:
                e["ts"] = float(e["ts"]) + offset
                args = e.get("args") or {}
                for key in ("External id", "correlation"):
                    if isinstance(args.get(key), int):
                        args[key] += k * 10_000_000
                if isinstance(e.get("id"), int):
                    e["id"] += k * 10_000_000
                if e.get("pid") == 59811:  # each rank a process of its own
                    e["pid"] = 59811 + r
                if e.get("tid") == 59811:
                    e["tid"] = 59811 + r
                if e.get("cat") == "kernel" and "nccl" not in e["name"]:
                    e["dur"] = float(e["dur"]) * (1 + rng.uniform(-0.01, 0.01))
                if str(e.get("name", "")).startswith("ProfilerStep#"):
                    e["name"] = f"ProfilerStep#{10 + k}"
                    e["dur"] = float(e["dur"]) + wait_us
            if r == straggler:  # the input wait: its DataLoader span, then the rest later
                dl = next(e for e in step if str(e.get("name", "")).startswith(DATALOADER))
                at = float(dl["ts"])
                _shift([e for e in step if e is not dl], at, wait_us)
                dl["dur"] = float(dl["dur"]) + wait_us
            else:  # the others wait as long in the step's first collective
                nccl = min(
                    (e for e in step if e.get("cat") == "kernel" and "nccl" in e["name"]),
                    key=lambda e: float(e["ts"]),
                )
                at = float(nccl["ts"])
                _shift([e for e in step if e is not nccl], at, wait_us)
                nccl["dur"] = float(nccl["dur"]) + wait_us
            events += step
        doc = {k: v for k, v in src.items() if k != "traceEvents"}
        doc["distributedInfo"] = {**src["distributedInfo"], "rank": r, "world_size": n}
        doc["traceEvents"] = events
        (folder / f"rank{r}.pt.trace.json").write_text(json.dumps(doc))
    return straggler


def _run(folder: Path, how: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", RUN, str(folder), json.dumps(how)], env=env,
                         capture_output=True, text=True, check=False, timeout=3600)  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"{how}: failed\n{out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _cluster(tmp: Path, env: dict[str, str], workers: int) -> tuple[list[Any], Path]:
    sched = tmp / "scheduler.json"
    dask = [sys.executable, "-m", "dask"]
    procs = [subprocess.Popen([*dask, "scheduler", "--scheduler-file", str(sched), "--host",
                               "127.0.0.1", "--port", "0", "--no-dashboard"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]  # fmt: skip
    deadline = time.monotonic() + 120
    while not sched.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    for i in range(workers):
        procs.append(subprocess.Popen(
            [*dask, "worker", "--scheduler-file", str(sched), "--nthreads", "1", "--name",
             f"w{i}", "--no-dashboard", "--no-nanny", "--host", "127.0.0.1"], env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
    from distributed import Client

    with Client(scheduler_file=str(sched), timeout="60s") as c:
        c.wait_for_workers(workers, timeout=120)
    return procs, sched


def _named(got: dict[str, Any], straggler: int) -> bool:
    return got["straggler"] == straggler and "idles longer" in got["straggler_fix"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,64", help="ranks per job, comma-separated")
    ap.add_argument("--steps", type=int, default=4, help="steps per rank (3.2 MB of JSON at 4)")
    ap.add_argument("--wait-ms", type=float, default=3.0, help="the straggler's input wait")
    ap.add_argument("--keep", type=Path, help="build the jobs here and keep them")
    ap.add_argument("--no-dask", action="store_true")
    ap.add_argument("--reuse", action="store_true",
                    help="with --keep: read a job already built there (same --steps)")  # fmt: skip
    a = ap.parse_args()
    env = src_first(ROOT / "src")
    sys.path.insert(0, str(ROOT / "src"))
    tmp = Path(tempfile.mkdtemp(prefix="ranks-bench-"))
    where = a.keep or tmp
    procs: list[Any] = []
    rows = []
    try:
        sched = None
        if not a.no_dask:
            procs, sched = _cluster(tmp, env, 2)
        for n in [int(x) for x in a.sizes.split(",")]:
            folder = where / f"job{n}"
            t0 = time.perf_counter()
            if a.reuse and a.keep and folder.is_dir() and len(list(folder.iterdir())) == n:
                straggler = n // 3  # as build_job plants it
            else:
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True)
                straggler = build_job(folder, n, a.steps, a.wait_ms * 1e3)
            built = time.perf_counter() - t0
            size = sum(f.stat().st_size for f in folder.iterdir())
            row: dict[str, Any] = {"ranks": n, "bytes": size, "build_s": round(built, 1),
                                   "planted": straggler}  # fmt: skip
            for name, how in (("jobs=1", {"jobs": 1}), ("jobs=2", {"jobs": 2})) + (
                (("dask 2 workers", {"cluster": {"scheduler_file": str(sched)}}),) if sched else ()
            ):
                load = os.getloadavg()[0]
                got = _run(folder, how, env)
                got["load_before"] = round(load, 2)
                got["named"] = _named(got, straggler)
                row[name] = got
                print(f"{n} ranks, {name}: {got['seconds']:.2f} s, client "
                      f"{got['client_peak_mib']:.0f} MiB, straggler {got['straggler']} "
                      f"({'named' if got['named'] else 'NOT named'})", flush=True)  # fmt: skip
            row["scaling_1_to_2"] = row["jobs=1"]["seconds"] / row["jobs=2"]["seconds"]
            # what the CPU time predicts on two idle cores: the readers' CPU seconds in all over
            # the busier reader's (the split of the work; the pool's start left out)
            cpus = [r["cpu_seconds"] for r in row["jobs=2"]["readers"]]
            row["cpu_scaling_1_to_2"] = sum(cpus) / max(cpus) if cpus and max(cpus) else None
            row["reader_cpu_s"] = sum(cpus)
            row["sequential_cpu_s"] = row["jobs=1"]["client_cpu_s"]
            rows.append(row)
            if not a.keep:
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        for p in procs[::-1]:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    _write(rows, a)


def _peaks(got: dict[str, Any]) -> str:
    peaks = [r["peak_rss_mib"] for r in got.get("readers", []) if r.get("peak_rss_mib")]
    return ", ".join(f"{p:.0f}" for p in peaks) if peaks else "—"


def _write(rows: list[dict[str, Any]], a: argparse.Namespace) -> None:
    RESULTS.mkdir(exist_ok=True)
    meta = {"machine": platform.node(), "cores": os.cpu_count(), "python": platform.python_version(),
            "steps_per_rank": a.steps, "wait_ms": a.wait_ms, "source": str(SOURCE.relative_to(ROOT))}  # fmt: skip
    (RESULTS / "diagnose_ranks_parallel.json").write_text(
        json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n"
    )
    lines = [
        "# diagnose_ranks: one reader, two local readers, a Dask cluster of two workers",
        "",
        f"`python benchmarks/diagnose_ranks_parallel.py --sizes {a.sizes}` on {meta['machine']} "
        f"({meta['cores']} cores), Python {meta['python']}. Each rank: DLRM's rank 0 "
        f"({meta['source']}) with its step repeated {a.steps} times, kernel times varied ±1 %; "
        f"the straggler (rank N // 3) waits {a.wait_ms:g} ms for its input at every step, the "
        "others as long in their first NCCL kernel. Every reading in a process of its own "
        "(jobs=2 includes starting its reader processes); peaks are resident memory (MiB); "
        "load before: the machine's 1-minute load average as the reading started (other "
        "work on this shared 2-core machine slows both readers).",
        "",
        "| ranks | MB | how | s | client peak | readers' / workers' peaks | straggler named "
        "| load before |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        for how in ("jobs=1", "jobs=2", "dask 2 workers"):
            got = row.get(how)
            if got is None:
                continue
            named = f"rank {got['straggler']}: " + ("yes" if got["named"] else "**no**")
            lines.append(
                f"| {row['ranks']} | {row['bytes'] / 1e6:.0f} | {how} | {got['seconds']:.2f} | "
                f"{got['client_peak_mib']:.0f} | {_peaks(got)} | {named} | {got['load_before']} |"
            )
    lines += ["", "Scaling from one reader (jobs=1, this process) to two reader processes, "
              "measured (wall clock, pool start included), and as the CPU time predicts it on "
              "two idle cores (the readers' CPU seconds in all over the busier reader's; the "
              "readers' CPU in all against the sequential process's, imports included, says "
              "whether reading in a pool costs more work):",
              ""]  # fmt: skip
    for row in rows:
        ok = "meets" if row["scaling_1_to_2"] >= SCALING_GOAL else "**below**"
        cpu = row.get("cpu_scaling_1_to_2")
        cpu_text = (f"; by CPU time {cpu:.2f}× (readers {row['reader_cpu_s']:.1f} CPU s, "
                    f"sequential {row['sequential_cpu_s']:.1f})" if cpu else "")  # fmt: skip
        lines.append(f"- {row['ranks']} ranks: **{row['scaling_1_to_2']:.2f}×** measured ({ok} "
                     f"the {SCALING_GOAL}× goal){cpu_text}")  # fmt: skip
    lines += ["", "The straggler's finding (largest job):", ""]
    last = rows[-1]["jobs=2"]
    lines += [f"> {last['straggler_title']}", ">", f"> fix: {last['straggler_fix']}", ""]
    (RESULTS / "diagnose_ranks_parallel.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
