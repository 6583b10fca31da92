"""In-memory least squares, whole calls: gpuprobe.lstsq against the hand-written normal-equations
solve (A.T@A, Cholesky, one refinement) and the usual solvers, each run in a fresh process that
loads the same A and b, so time and peak memory (ru_maxrss, A included) are the call's own.

Contenders alternate within each round (the machine is shared and noisy); the ratios are paired
per round. Results: benchmarks/results/lstsq_inmemory.{json,md}.

    python benchmarks/lstsq_inmemory.py [--rounds 3] [--sizes 200000x500,400000x1000]
        [--baselines-at 200000x500]   # numpy/scipy/dask only at these sizes (memory, time)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = Path(os.environ.get("LSTSQ_BENCH_DIR", "/tmp/lstsq_bench"))
ALL = ("gpuprobe", "hand-normal", "numpy.linalg.lstsq", "scipy-gelsd", "scipy-gelsy", "dask.array")
PAIRED = ("gpuprobe", "hand-normal")


def make(m: int, n: int) -> tuple[Path, Path]:
    """A (standard normal, seeded) and b = A·x + noise as .npy files, written in blocks."""
    DATA.mkdir(parents=True, exist_ok=True)
    pa, pb = DATA / f"A_{m}x{n}.npy", DATA / f"b_{m}x{n}.npy"
    if pa.exists() and pb.exists():
        return pa, pb
    a = np.lib.format.open_memmap(pa, mode="w+", dtype=np.float64, shape=(m, n))
    b = np.empty(m)
    x = np.random.default_rng(1).standard_normal(n)
    step = 50_000
    for i in range(0, m, step):
        blk = np.random.default_rng([0, i]).standard_normal((min(step, m - i), n))
        a[i : i + len(blk)] = blk
        b[i : i + len(blk)] = blk @ x + 0.1 * np.random.default_rng([2, i]).standard_normal(
            len(blk)
        )
    a.flush()
    del a
    np.save(pb, b)
    return pa, pb


def child(name: str, pa: str, pb: str) -> dict:
    a = np.load(pa)
    b = np.load(pb)
    # imports before the clock: the call is timed, not loading Python modules
    import scipy.linalg as sl

    from gpuprobe.tools.scale.lstsq import lstsq

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t0 = time.perf_counter()
    extra: dict = {}
    if name == "gpuprobe":
        x, rep = lstsq(a, b)
        extra = {
            "method": rep.method,
            "engine": rep.engine.cluster,
            "setup_s": rep.setup_s,
            "passes": rep.passes,
            "report_wall_s": rep.wall_s,
        }
    elif name == "hand-normal":
        g = a.T @ a
        c = a.T @ b
        f = sl.cho_factor(g)
        x = sl.cho_solve(f, c)
        r = b - a @ x
        x = x + sl.cho_solve(f, a.T @ r)
    elif name == "numpy.linalg.lstsq":
        x = np.linalg.lstsq(a, b, rcond=None)[0]
    elif name.startswith("scipy-"):
        x = sl.lstsq(a, b, lapack_driver=name.split("-")[1], check_finite=False)[0]
    elif name == "dask.array":
        import dask.array as da
        from distributed import Client, LocalCluster

        with (
            LocalCluster(processes=False, dashboard_address="127.0.0.1:0") as cl,
            Client(cl),
        ):
            ad = da.from_array(
                a, chunks=(max(1, (128 * 2**20) // (8 * a.shape[1])), -1), name=False
            )
            bd = da.from_array(b, chunks=(ad.chunks[0],), name=False)
            x = np.asarray(da.linalg.lstsq(ad, bd)[0].compute())
    else:
        raise SystemExit(f"unknown contender {name}")
    took = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    resid = float(np.linalg.norm(b - a @ x))
    return {
        "name": name,
        "s": took,
        "peak_bytes": peak,
        "data_bytes": base,
        "residual": resid,
        "x_head": x[:4].tolist(),
        **extra,
    }


def run_child(name: str, pa: Path, pb: Path, timeout: float) -> dict:
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--child", name, str(pa), str(pb)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"name": name, "error": [f"did not finish in {timeout:g} s"]}
    if out.returncode != 0:
        return {"name": name, "error": out.stderr.strip().splitlines()[-1:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="200000x500,400000x1000")
    ap.add_argument("--baselines-at", default="200000x500", help="'none' for the pair only")
    ap.add_argument("--timeout", type=float, default=420)
    ap.add_argument("--tag", default="", help="suffix of the results' file names")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    results = []
    for size in args.sizes.split(","):
        m, n = (int(v) for v in size.split("x"))
        pa, pb = make(m, n)
        names = list(ALL) if size in args.baselines_at.split(",") else list(PAIRED)
        runs: list[dict] = []
        for rnd in range(args.rounds):
            order = names[rnd % len(names) :] + names[: rnd % len(names)]
            for name in order:
                if rnd > 0 and name not in PAIRED:  # the slow baselines: once
                    continue
                r = run_child(name, pa, pb, args.timeout)
                r.update(round=rnd, rows=m, cols=n)
                runs.append(r)
                print(json.dumps(r), flush=True)
        results.append({"rows": m, "cols": n, "runs": runs})
    summary = summarize(results)
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    stem = "lstsq_inmemory" + (f"_{args.tag}" if args.tag else "")
    (out / f"{stem}.json").write_text(json.dumps({"sizes": results, "summary": summary}, indent=2))
    (out / f"{stem}.md").write_text(markdown(summary, args.rounds))
    print(markdown(summary, args.rounds))


def summarize(results: list[dict]) -> list[dict]:
    rows = []
    for res in results:
        runs = [r for r in res["runs"] if "error" not in r]
        by = {}
        for r in runs:
            by.setdefault(r["name"], []).append(r)
        hand = {r["round"]: r for r in by.get("hand-normal", [])}
        for name, rs in by.items():
            t_ratio = [r["s"] / hand[r["round"]]["s"] for r in rs if r["round"] in hand]
            m_ratio = [
                r["peak_bytes"] / hand[r["round"]]["peak_bytes"] for r in rs if r["round"] in hand
            ]
            rows.append(
                {
                    "rows": res["rows"],
                    "cols": res["cols"],
                    "name": name,
                    "n": len(rs),
                    "median_s": statistics.median(r["s"] for r in rs),
                    "min_s": min(r["s"] for r in rs),
                    "peak_gib": max(r["peak_bytes"] for r in rs) / 2**30,
                    "data_gib": rs[0]["data_bytes"] / 2**30,
                    "time_vs_hand": statistics.median(t_ratio) if t_ratio else None,
                    "memory_vs_hand": statistics.median(m_ratio) if m_ratio else None,
                    "residual": rs[0]["residual"],
                    "method": rs[0].get("method"),
                    "setup_s": statistics.median(r["setup_s"] for r in rs)
                    if "setup_s" in rs[0]
                    else None,
                }
            )
        for r in res["runs"]:
            if "error" in r:
                rows.append(
                    {
                        "rows": res["rows"],
                        "cols": res["cols"],
                        "name": r["name"],
                        "error": r["error"],
                    }
                )
    return rows


def markdown(summary: list[dict], rounds: int) -> str:
    lines = [
        "# lstsq in memory: whole calls, each in a fresh process",
        "",
        f"{rounds} rounds of gpuprobe and the hand-written solve, alternating (the other solvers once, "
        "in the first round); ratios are the median of per-round ratios "
        "to the hand-written normal solve (A.T@A, Cholesky, one refinement). Peak is the process's "
        "ru_maxrss, A and b included (data = RSS after loading them).",
        "",
        "| size | contender | runs | median s | min s | × hand time | peak GiB | × hand memory | data GiB | residual |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in summary:
        size = f"{r['rows']}×{r['cols']}"
        if "error" in r:
            lines.append(f"| {size} | {r['name']} | failed: {r['error']} |||||||")
            continue
        fmt = lambda v, s=".2f": "n/a" if v is None else format(v, s)  # noqa: E731
        name = r["name"] + (
            f" ({r['method']}, set-up {r['setup_s']:.3f} s)" if r.get("method") else ""
        )
        lines.append(
            f"| {size} | {name} | {r['n']} | {r['median_s']:.2f} | {r['min_s']:.2f} | "
            f"{fmt(r['time_vs_hand'])} | {r['peak_gib']:.2f} | {fmt(r['memory_vs_hand'])} | "
            f"{r['data_gib']:.2f} | {r['residual']:.10g} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
