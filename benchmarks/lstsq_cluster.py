"""gpuprobe.lstsq on a cluster started with the dask CLI (`dask scheduler`, `dask worker` on
127.0.0.1), the data read by the workers from a shared .npy path:

1. `gpuprobe scale lstsq --scheduler ADDR --workers 1,2`: speedup, parallel efficiency and
   communication share on 1 and 2 workers.
2. Out of core: an .npy A larger than the workers' total memory limit (default 2,000,000 × 250:
   4 GB on disk, 2 workers of 1 GiB each), solved with each worker's peak RSS sampled, and
   whether any worker paused or died.

Results: benchmarks/results/lstsq_cluster.{json,md}.

    python benchmarks/lstsq_cluster.py [--sweep 100000x200] [--ooc 2000000x250] [--limit 1GiB]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = Path(os.environ.get("LSTSQ_BENCH_DIR", "/tmp/lstsq_bench"))
DASK = Path(sys.executable).with_name("dask")


def write_npy(path: Path, m: int, n: int) -> Path:
    """[A b] (n columns of A, then b) as one .npy, written block by block (never all in memory)."""
    if path.exists():
        return path
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(m, n + 1))
    x = np.random.default_rng(1).standard_normal(n)
    step = 20_000
    for i in range(0, m, step):
        k = min(step, m - i)
        blk = np.random.default_rng([0, i]).standard_normal((k, n))
        out[i : i + k, :n] = blk
        out[i : i + k, n] = blk @ x + 0.1 * np.random.default_rng([2, i]).standard_normal(k)
    out.flush()
    del out
    return path


class Cluster:
    def __init__(self, workers: int, limit: str, tmp: Path) -> None:
        self.file = tmp / "scheduler.json"
        self.file.unlink(missing_ok=True)
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        self.procs = [
            subprocess.Popen(
                [
                    str(DASK),
                    "scheduler",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--scheduler-file",
                    str(self.file),
                    "--no-dashboard",
                ],
                **quiet,
            )
        ]
        t0 = time.monotonic()
        while not self.file.exists():
            if time.monotonic() - t0 > 60:
                raise SystemExit("dask scheduler did not start")
            time.sleep(0.2)
        for i in range(workers):
            self.procs.append(
                subprocess.Popen(
                    [
                        str(DASK),
                        "worker",
                        "--scheduler-file",
                        str(self.file),
                        "--nthreads",
                        "1",
                        "--memory-limit",
                        limit,
                        "--host",
                        "127.0.0.1",
                        "--name",
                        f"w{i}",
                        "--no-dashboard",
                    ],
                    **quiet,
                )
            )
        self.address = json.loads(self.file.read_text())["address"]
        from distributed import Client

        with Client(self.address, timeout="30s") as c:
            c.wait_for_workers(workers, timeout=120)

    def close(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def sweep(address: str, path: Path) -> dict:
    argv = f"scale lstsq --workers 1,2 --method normal,tsqr --repeats 2 --json --input {path}"
    out = subprocess.run(
        [sys.executable, "-m", "gpuprobe", *argv.split(), "--scheduler", address],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if out.returncode not in (0, 1):
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout)


def out_of_core(address: str, path: Path) -> dict:
    import psutil
    from distributed import Client

    from gpuprobe.tools.scale.engine import paused_workers
    from gpuprobe.tools.scale.lstsq import lstsq

    with Client(address, timeout="30s") as c:
        c.wait_for_workers(2, timeout=120)
        info = c.scheduler_info(n_workers=-1)["workers"]
        limits = {a: w["memory_limit"] for a, w in info.items()}
        pids = c.run(os.getpid)
        peak = dict.fromkeys(pids, 0)
        paused: list = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                for addr, pid in pids.items():
                    with contextlib.suppress(psutil.Error):
                        peak[addr] = max(peak[addr], psutil.Process(pid).memory_info().rss)
                bad = paused_workers(c)
                if bad:
                    paused.extend(bad)
                stop.wait(0.25)

        t = threading.Thread(target=sample, daemon=True)
        t.start()
        t0 = time.perf_counter()
        _, rep = lstsq(str(path), None, "normal", client=c)
        took = time.perf_counter() - t0
        stop.set()
        t.join()
        died = set(pids.values()) - set(c.run(os.getpid).values())
    return {
        "file_bytes": path.stat().st_size,
        "workers_memory_limit_bytes": limits,
        "peak_rss_bytes": peak,
        "paused": paused,
        "workers_died": len(died),
        "seconds": took,
        "report": {
            "wall_s": rep.wall_s,
            "setup_s": rep.setup_s,
            "compute_s": rep.compute_s,
            "communication_s": rep.communication_s,
            "passes": rep.passes,
            "row_blocks": rep.row_blocks,
            "method": rep.method,
            "residual_norm": rep.residual_norm,
            "cond_estimate": rep.cond_estimate,
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep", default="100000x200")
    ap.add_argument("--ooc", default="2000000x250")
    ap.add_argument("--limit", default="1GiB")
    args = ap.parse_args()
    DATA.mkdir(parents=True, exist_ok=True)
    res: dict = {}
    cl = Cluster(2, args.limit, DATA)
    try:
        m, n = (int(v) for v in args.sweep.split("x"))
        res["sweep"] = sweep(cl.address, write_npy(DATA / f"Ab_{m}x{n}.npy", m, n))
        print(json.dumps(res["sweep"]["results"]), flush=True)
        m, n = (int(v) for v in args.ooc.split("x"))
        res["out_of_core"] = out_of_core(cl.address, write_npy(DATA / f"Ab_{m}x{n}.npy", m, n))
        print(json.dumps(res["out_of_core"]), flush=True)
    finally:
        cl.close()
    out = HERE / "results"
    (out / "lstsq_cluster.json").write_text(json.dumps(res, indent=2))
    (out / "lstsq_cluster.md").write_text(markdown(res, args))
    print(markdown(res, args))


def markdown(res: dict, args: argparse.Namespace) -> str:
    s = res["sweep"]
    lines = [
        "# lstsq on a CLI-started Dask cluster",
        "",
        f"`dask scheduler` and two `dask worker --nthreads 1 --memory-limit {args.limit}` on "
        "127.0.0.1; the workers read the .npy from its path. Best of 2 per point.",
        "",
        f"## 1 vs 2 workers: {s['rows']} × {s['cols']} ({s['problem']})",
        "",
        "| method | workers | time s | speedup | efficiency | communication | cpu/worker | error vs numpy |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in s["results"]:
        err = "n/a" if r["error_vs_numpy"] is None else f"{r['error_vs_numpy']:.1e}"
        cpu = "n/a" if r["cpu_per_worker"] is None else f"{r['cpu_per_worker']:.2f}"
        lines.append(
            f"| {r['requested']} | {r['workers']} | {r['wall_s']:.2f} | {r['speedup']:.2f} | "
            f"{r['efficiency']:.0%} | {r['communication_share']:.0%} | {cpu} | {err} |"
        )
    o = res["out_of_core"]
    rep = o["report"]
    lim = sum(o["workers_memory_limit_bytes"].values())
    lines += [
        "",
        f"## Out of core: {o['file_bytes'] / 2**30:.2f} GiB .npy, workers' total limit "
        f"{lim / 2**30:.2f} GiB",
        "",
        f"- whole call {o['seconds']:.1f} s (set-up {rep['setup_s']:.2f} s, compute "
        f"{rep['compute_s']:.1f} s, communication {rep['communication_s']:.1f} s), "
        f"{rep['passes']} passes over A in {rep['row_blocks']} row blocks, method {rep['method']}",
        "- peak RSS per worker: "
        + ", ".join(
            f"{a}: {v / 2**30:.2f} GiB of {o['workers_memory_limit_bytes'][a] / 2**30:.2f} GiB"
            for a, v in o["peak_rss_bytes"].items()
        ),
        f"- workers paused during the solve: {len(o['paused'])} samples; workers died: "
        f"{o['workers_died']}",
        f"- residual {rep['residual_norm']:.10g}, κ ≈ {rep['cond_estimate']:.3g}",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
