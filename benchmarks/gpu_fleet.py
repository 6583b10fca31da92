"""The fleet commands on a real card (a step of benchmarks/gpu_sweep.sh): a Dask cluster of two
worker processes on this machine, as two workers of one GPU box, then ``gpuprobe doctor
--cluster`` as a user runs them, as JSON (gpu_sweep_import.py draws their text from it).

    python benchmarks/gpu_fleet.py --out DIR     # DIR/fleet-doctor.json, DIR/fleet-bench.json
    python benchmarks/gpu_fleet.py --check       # the imports and the round trip, no cluster
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def _check() -> int:
    import distributed  # noqa: F401

    from gpuprobe.tools.fleet.model import FleetDoctorReport

    empty = FleetDoctorReport(scheduler="tcp://127.0.0.1:1")
    assert FleetDoctorReport.from_dict(json.loads(json.dumps(empty.to_dict()))) == empty
    print("gpu_fleet: distributed and the fleet report's round trip are here")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    if args.check:
        return _check()
    from distributed import LocalCluster

    args.out.mkdir(parents=True, exist_ok=True)
    rc = 0
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as lc:  # fmt: skip
        addr = lc.scheduler_address
        for kind, extra in (("doctor", []), ("bench", ["--backend", "torch"])):
            t0 = time.monotonic()
            p = subprocess.run(
                [sys.executable, "-m", "gpuprobe", kind, "--cluster", addr, "--json", *extra],
                capture_output=True, text=True, timeout=300, check=False,
            )  # fmt: skip
            took = time.monotonic() - t0
            (args.out / f"fleet-{kind}.json").write_text(p.stdout)
            print(f"{kind} --cluster: exit {p.returncode} in {took:.1f} s", flush=True)
            if p.stderr.strip():
                print(p.stderr[-2000:], file=sys.stderr)
            try:
                json.loads(p.stdout)
            except ValueError as e:
                print(f"{kind}: no report ({e})", file=sys.stderr)
                rc = rc or 1
            rc = rc or (p.returncode if p.returncode not in (0, 1) else 0)
    return rc


if __name__ == "__main__":
    sys.exit(main())
