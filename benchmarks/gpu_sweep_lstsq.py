"""Least squares on Dask over CuPy arrays (one worker per GPU), against numpy.linalg.lstsq: the
`scale` step of gpu_sweep.sh. Writes the report as JSON.

    python benchmarks/gpu_sweep_lstsq.py --out scale-lstsq.json [--rows N] [--cols N] [--check]

--check (the sweep's dry run) checks that the API and the script's arguments are in place without
touching a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="where to write the JSON report")
    p.add_argument("--rows", type=int, default=400_000)
    p.add_argument("--cols", type=int, default=256)
    p.add_argument("--check", action="store_true", help="check the API only (no GPU needed)")
    args = p.parse_args(argv)

    import numpy as np

    import gpuprobe

    if args.check:
        assert callable(gpuprobe.lstsq), "gpuprobe.lstsq is missing"
        args.out.write_text(json.dumps({"check": "ok"}) + "\n")
        return 0
    try:
        import cupy as cp
    except ImportError as exc:
        print(f"CuPy is not installed here: {exc}", file=sys.stderr)
        return 1
    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.rows, args.cols))
    x_true = rng.standard_normal(args.cols)
    b = a @ x_true + 1e-6 * rng.standard_normal(args.rows)
    out = {"rows": args.rows, "cols": args.cols, "methods": {}}
    for method in ("normal", "tsqr"):
        t0 = time.perf_counter()
        x, report = gpuprobe.lstsq(
            cp.asarray(a), cp.asarray(b), method=method, devices="gpu", reference="numpy"
        )
        wall = time.perf_counter() - t0
        out["methods"][method] = {
            "wall_s": round(wall, 3),
            "max_abs_error_vs_truth": float(np.max(np.abs(x - x_true))),
            "report": report.to_dict() if hasattr(report, "to_dict") else str(report),
        }
        print(
            f"{method}: {wall:.2f} s, max |x - x_true| {out['methods'][method]['max_abs_error_vs_truth']:.2e}"
        )
    args.out.write_text(json.dumps(out, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
