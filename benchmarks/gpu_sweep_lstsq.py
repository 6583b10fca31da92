"""Least squares on Dask over CuPy arrays (one worker per GPU): the `scale` step of gpu_sweep.sh.
Writes the report as JSON.

1. Accuracy: ``normal`` and ``tsqr`` on a host problem sent to the GPU, against the true x and
   numpy.linalg.lstsq.
2. fp64 throughput (issue 14's goal: ≥ 0.6 of the card's fp64 peak): ``normal`` on a problem
   made on the GPU (``--big-rows`` × ``--big-cols`` float64, several GB), its flop rate over the
   solve (``solve_s``: the passes over A and the n × n work, cluster start and input excluded), as
   a fraction of the spec table's fp64 peaks (CUDA cores and tensor cores). Two counts:
   ``useful`` (m·n² for AᵀA, which is symmetric, plus 4mn per refinement pass) and ``executed``
   (2m·n²: the block kernel's ``a.T @ a`` is a GEMM on CuPy). Beside them, measured in the same
   process on the same card: a plain CuPy DGEMM of the same block shape and cuBLAS DSYRK
   (``cupy.cublas.syrk``), as the ceilings that kernel could reach.

    python benchmarks/gpu_sweep_lstsq.py --out scale-lstsq.json [--rows N] [--cols N]
        [--big-rows N] [--big-cols N] [--check]

--check (the sweep's dry run) checks that the API and the script's arguments are in place without
touching a GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="where to write the JSON report")
    p.add_argument("--rows", type=int, default=400_000)
    p.add_argument("--cols", type=int, default=256)
    p.add_argument("--big-rows", type=int, default=1_000_000)
    p.add_argument("--big-cols", type=int, default=1024)
    p.add_argument("--check", action="store_true", help="check the API only (no GPU needed)")
    args = p.parse_args(argv)

    import numpy as np

    import gpuprobe
    from gpuprobe.platform.hardware.specs import spec_for

    if args.check:
        assert callable(gpuprobe.lstsq), "gpuprobe.lstsq is missing"
        assert spec_for("NVIDIA H100 80GB HBM3").fp64_tensor, "no fp64 tensor peak for the H100"
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
    args.out.write_text(json.dumps(out, indent=1, default=str) + "\n")  # phase 1 kept if 2 fails
    out["fp64_throughput"] = fp64_throughput(args.big_rows, args.big_cols)
    args.out.write_text(json.dumps(out, indent=1, default=str) + "\n")
    return 0


def _cupy_tflops(fn: Any, flop: float, reps: int = 10) -> float:
    """TFLOP/s of ``fn`` on the GPU: CUDA events around each call, median, after a warm-up."""
    import cupy as cp

    fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(cp.cuda.get_elapsed_time(s, e) / 1e3)
    return flop / statistics.median(times) / 1e12


def fp64_throughput(m: int, n: int) -> dict[str, Any]:
    """Phase 2: the normal-equations solve's fp64 flop rate, and its ceilings on this card."""
    import cupy as cp
    import numpy as np

    import gpuprobe
    from gpuprobe.platform.hardware.specs import spec_for

    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    spec = spec_for(name)
    peaks = {"fp64": spec.fp64 if spec else None, "fp64_tensor": spec.fp64_tensor if spec else None}
    rng = cp.random.default_rng(1)
    a = rng.standard_normal((m, n), dtype=cp.float64)
    x_true = rng.standard_normal(n, dtype=cp.float64)
    b = a @ x_true + 1e-6 * rng.standard_normal(m, dtype=cp.float64)
    cp.cuda.Device().synchronize()
    x, report = gpuprobe.lstsq(a, b, method="normal", devices="gpu")
    err = float(np.linalg.norm(x - x_true.get()) / np.linalg.norm(x_true.get()))
    passes = max(0, report.passes - 1)  # reads of A after the Gram pass: 4mn flops each
    useful = m * n * n + 2 * m * n + passes * 4 * m * n
    executed = 2 * m * n * n + 2 * m * n + passes * 4 * m * n
    rates = {
        "useful_tflops": useful / report.solve_s / 1e12,
        "executed_tflops": executed / report.solve_s / 1e12,
    }
    # the ceilings, on one block of the same shape as the solve's (rows per block ≈ m / blocks)
    rows = m // max(1, report.row_blocks)
    blk = a[:rows]
    ceilings = {"block_rows": rows}
    ceilings["dgemm_tflops"] = _cupy_tflops(lambda: blk.T @ blk, 2.0 * rows * n * n)
    try:
        from cupy import cublas

        ceilings["dsyrk_useful_tflops"] = _cupy_tflops(
            lambda: cublas.syrk("T", blk), 1.0 * rows * n * n
        )
    except Exception as exc:  # an older CuPy without cupy.cublas.syrk
        ceilings["dsyrk"] = f"unavailable: {type(exc).__name__}: {exc}"
    fractions = {
        f"{k.removesuffix('_tflops')}_vs_{p}": v / peak
        for k, v in {**rates, **{k: v for k, v in ceilings.items() if k.endswith("tflops")}}.items()
        for p, peak in peaks.items()
        if peak and isinstance(v, float)
    }
    print(
        f"fp64 normal {m}x{n}: solve {report.solve_s:.3f} s, {rates['useful_tflops']:.1f} TFLOP/s "
        f"useful ({rates['executed_tflops']:.1f} executed); DGEMM {ceilings['dgemm_tflops']:.1f}; "
        f"peaks {peaks}; rel. error {err:.1e}"
    )
    return {
        "device": name,
        "rows": m,
        "cols": n,
        "gib": round(m * n * 8 / 2**30, 2),
        "solve_s": report.solve_s,
        "wall_s": report.wall_s,
        "setup_s": report.setup_s,
        "compute_s": report.compute_s,
        "row_blocks": report.row_blocks,
        "passes_over_a": report.passes,
        "refinement_steps": report.refinement_steps,
        "rel_error_vs_truth": err,
        "peaks_tflops": peaks,
        "peak_source": spec.source if spec else None,
        **rates,
        "ceilings": ceilings,
        "fractions": fractions,
        "goal": "useful rate >= 0.6 of the fp64 peak",
    }


if __name__ == "__main__":
    sys.exit(main())
