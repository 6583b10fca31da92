"""How long ``doctor --cluster --quick`` and ``bench --cluster --quick`` take for 1, 2, 4 and 8
worker processes (a LocalCluster of processes, one thread each, on this machine), beside the
slowest node's own time in the same run (``slowest_node_s``: the time doctor or the bench took
on that worker). The goal (issue 29): the fleet costs no more than the slowest node plus 1 s,
that is ``overhead = elapsed - slowest node <= 1 s``.

The nodes run at the same time, so on a machine with fewer cores than workers each node's own
time grows with the number of workers (they share the cores); the overhead is what the fleet adds
on top: connecting, Client.run to each worker, moving the reports back, grouping and judging.

Results: benchmarks/results/fleet_timing.{json,md}.

    python benchmarks/fleet_timing.py [--workers 1,2,4,8] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GOAL_OVERHEAD_S = 1.0  # s the fleet may add to its slowest node (issue 29)


def _one(client: Any, what: str) -> dict[str, Any]:
    import gpuprobe

    t0 = time.perf_counter()
    if what == "doctor":
        r: Any = gpuprobe.fleet_doctor(client, quick=True)
    else:
        r = gpuprobe.fleet_bench(client, quick=True)
    wall = time.perf_counter() - t0
    ok = sum(n.status == "ok" for n in r.nodes)
    return {
        "command": f"{what} --cluster --quick",
        "elapsed_s": round(wall, 2),
        "slowest_node_s": r.slowest_node_s,
        "overhead_s": round(wall - (r.slowest_node_s or 0.0), 2),
        "nodes_ok": ok,
        "nodes": len(r.nodes),
    }


def markdown(rows: list[dict[str, Any]], machine: str) -> str:
    """The table and what it means."""
    head = ("| workers | command | fleet s | slowest node s | overhead s | goal ≤ 1 s | nodes ok |\n"
            "|---:|---|---:|---:|---:|---|---:|")  # fmt: skip
    lines = [
        f"| {r['workers']} | `{r['command']}` | {r['elapsed_s']:.1f} | "
        f"{r['slowest_node_s'] or 0:.1f} | {r['overhead_s']:.2f} | "
        f"{'yes' if r['overhead_s'] <= GOAL_OVERHEAD_S else 'no'} | {r['nodes_ok']}/{r['nodes']} |"
        for r in rows
    ]
    md = "\n".join([
        "# fleet timing (benchmarks/fleet_timing.py)", "",
        f"Machine: {machine}; LocalCluster of processes, 1 thread each; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.", "",
        head, *lines, "",
        "fleet s: the call's wall time; slowest node s: the slowest worker's own doctor or bench "
        "time (from its first import to its report) in the same run; overhead: the difference, "
        "what the fleet adds (asking each worker, moving the reports back, grouping, judging). "
        "doctor collapses a host's alike workers into one node (nodes ok 1/1); bench keeps a row "
        "per worker. With more workers than cores the workers share the cores, so every node's "
        "own time grows with their number (the 1-worker rows are a node alone).", "",
    ])  # fmt: skip
    return md


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="1,2,4,8")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    from distributed import Client, LocalCluster

    rows = []
    for n in [int(x) for x in args.workers.split(",")]:
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                          dashboard_address=None) as lc, Client(lc) as client:  # fmt: skip
            client.wait_for_workers(n)
            for what in ("doctor", "bench"):
                for _ in range(args.repeat):
                    row = {"workers": n, **_one(client, what)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    cores = os.cpu_count()
    machine = f"{platform.node()}, {cores} cores, {platform.python_version()}"
    md = markdown(rows, machine)
    print(md)
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / "fleet_timing.md").write_text(md, encoding="utf-8")
    (out / "fleet_timing.json").write_text(
        json.dumps({"machine": machine, "rows": rows}, indent=1) + "\n", encoding="utf-8"
    )


if __name__ == "__main__":
    main()
