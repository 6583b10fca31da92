"""How long ``doctor --cluster --quick`` and ``bench --cluster --quick`` take for 1, 2, 4 and 8
worker processes (a LocalCluster of processes, one thread each, on this machine), beside the
slowest host's own work in the same run. The goal (issue 29): the fleet costs no more than
that work plus 1 s, that is ``overhead = elapsed - slowest host's work <= 1 s``.

A host's work: for doctor, its slowest node (the environment is read on every worker at once,
the kernels run on one worker of the host; that row's time is both); for bench, the sum of its
nodes' own times, since a host's workers run one after the other so as not to measure each other.
On a machine with fewer cores than workers each node's own time grows with the number of workers
(they share the cores); the overhead is what the fleet adds on top: connecting, Client.run to
each worker, moving the reports back, grouping and judging.

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
    per_host: dict[str, list[float]] = {}
    for n in r.nodes:
        per_host.setdefault(n.host, []).append(n.elapsed_s or 0.0)
    # bench: a host's workers run in turn
    work = max((max(ts) if what == "doctor" else sum(ts) for ts in per_host.values()), default=0.0)
    return {
        "command": f"{what} --cluster --quick",
        "elapsed_s": round(wall, 2),
        "slowest_node_s": r.slowest_node_s,
        "host_work_s": round(work, 2),
        "overhead_s": round(wall - work, 2),
        "nodes_ok": ok,
        "nodes": len(r.nodes),
    }


def markdown(rows: list[dict[str, Any]], machine: str) -> str:
    """The table and what it means."""
    head = ("| workers | command | fleet s | slowest node s | host's work s | overhead s | "
            "goal ≤ 1 s | nodes ok |\n|---:|---|---:|---:|---:|---:|---|---:|")  # fmt: skip
    lines = [
        f"| {r['workers']} | `{r['command']}` | {r['elapsed_s']:.1f} | "
        f"{r['slowest_node_s'] or 0:.1f} | {r['host_work_s']:.1f} | {r['overhead_s']:.2f} | "
        f"{'yes' if r['overhead_s'] <= GOAL_OVERHEAD_S else 'no'} | {r['nodes_ok']}/{r['nodes']} |"
        for r in rows
    ]
    md = "\n".join([
        "# fleet timing (benchmarks/fleet_timing.py)", "",
        f"Machine: {machine}; LocalCluster of processes, 1 thread each; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.", "",
        head, *lines, "",
        "fleet s: the call's wall time; slowest node s: the slowest worker's own doctor or bench "
        "time (from its first import to its report) in the same run; host's work s: the slowest "
        "host's (all on one host here): its slowest node for doctor (the environment on every "
        "worker at once, the kernels on one), the sum of its nodes for bench (a host's workers "
        "in turn); overhead: wall time minus the host's work, what the fleet adds (asking each "
        "worker, moving the reports back, grouping, judging). "
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
