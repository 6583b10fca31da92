"""Least squares on one GPU (CuPy arrays, solved in this process): the `scale` step of gpu_sweep.sh.
Writes the report as JSON.

1. Accuracy: ``normal`` and ``tsqr`` on a host problem copied to the GPU, against the true x and
   numpy.linalg.lstsq (whose CPU time dominates this phase's wall time).
2. fp64 throughput (issue 30): ``normal`` on a problem made on the GPU (``--big-rows`` ×
   ``--big-cols`` float64, several GB), solved twice in this process: ``cold`` (the first call at
   this size: its cuBLAS kernels loaded; phase 1's smaller solves ran before it) and ``warm``
   (the steady rate, judged). Its flop rate over ``solve_s`` (the passes over A and the n × n work; set-up
   apart), counted two ways:

   - ``useful``: m·n² for AᵀA (symmetric: the triangle), 2mn for Aᵀb, 4mn per further pass;
   - ``executed``: what the products really run: the Gram's triangular GEMM panels
     (``device.gram_flops``: 62.5 % of 2mn² at n = 1024) on one GPU, 2mn² when the Gram went
     through Dask workers' full GEMMs.

   Each against both fp64 peaks of the spec table: ``fp64`` (the CUDA cores' FMA rate, NVIDIA's
   "FP64") and ``fp64_tensor`` (DMMA, reached only by GEMM-shaped work).

   **The goal** (issue 30: useful fp64 rate ≥ 0.6 of the card's fp64 peak) **is judged as the
   warm useful rate against the ``fp64`` peak.** Useful work is the solve's arithmetic, whatever
   kernel does it; the tensor-core peak is a GEMM's: a Gram computed as a full GEMM executes 2mn²
   for mn² useful, so its useful rate is at most half the tensor peak even at 100 % DGEMM
   efficiency, and triangular panels at the H200's recorded DGEMM rate (52.9 TFLOP/s) reach at most
   52.9·k/(k+1) ≈ 42 TFLOP/s (0.63 of 67) for the Gram alone, before the memory-bound passes and
   the host's n × n work: 0.6 of the tensor peak would ask for a solve that is nothing but a
   perfect GEMM. 0.6 of the fp64 peak asks for 60 % of what a perfect FMA-only SYRK could do,
   and is reachable only by using the tensor cores. ``executed_vs_fp64_tensor`` says how well the
   products themselves run, beside the ceilings measured on the same card in the same run.

   Ceilings: DGEMM ``AᵀA`` over all rows (what a user would write) and over one block of 16,129
   rows (the old Dask path's block, recorded on the H200 at 52.9 TFLOP/s), cuBLAS DSYRK over all
   rows, the solver's own Gram products alone (``gram``), and one GEMV ``Aᵀv`` (the memory-bound
   pass, as GB/s). ``breakdown`` adds them up the way the solve uses them, with the host's n × n
   work timed on the solve's own Gram, and shows what is left (``other_s``: copies, Python).

    python benchmarks/gpu_sweep_lstsq.py --out scale-lstsq.json [--rows N] [--cols N]
        [--big-rows N] [--big-cols N] [--check]

--check (the sweep's dry run) checks the API and the arithmetic without a GPU, and prints what the
H200's recorded ceilings predict for the solve (:func:`predict`).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Issue 30's goal: useful fp64 rate of the solve as a fraction of the card's fp64 peak.
GOAL_FRACTION = 0.6
GOAL_PEAK = "fp64"  # the CUDA cores' fp64 peak, not the tensor cores' (see the docstring)
# Rows of one block on the old Dask path for 1,000,000 × 1024 on the H200 (62 blocks).
OLD_BLOCK_ROWS = 16_129
# What the H200 recorded (/tmp/sw/gpu-sweep/scale-lstsq.json, issue 30): the ceilings --check
# predicts from. DGEMM of one 16,129-row block, TFLOP/s; HBM3e read bandwidth is the spec's
# 4800 GB/s, of which a streaming GEMV reaches about READ_FRACTION (an assumption until measured).
H200_RECORDED = {"dgemm_tflops": 52.9, "dsyrk_useful_tflops": 15.1, "old_solve_s": 1.003}
# the sweep of 2026-11-26 (A a CuPy array solved in place): the Gram's products at 51.4 TFLOP/s
# executed, GEMV at 4457 GB/s, the host's n × n work 38.9 ms (its Cholesky with NumPy, the
# suite running beside it), a 77.4 ms solve: 0.40 of the fp64 peak
H200_RECORDED_1126 = {"gram_tflops": 51.4, "gemv_gbs": 4457.0, "host_s": 0.0389, "solve_s": 0.0774}
H200_PEAKS = {"fp64": 34.0, "fp64_tensor": 67.0}
H200_BANDWIDTH_GBS = 4800.0
READ_FRACTION = 0.85
# The n × n work of a solve at n = 1024 as the solver now does it, seconds: the factor on the
# card (cuSOLVER's dpotrf at n = 1024, about 1-2 ms, with the Gram's 8 MB there and L back,
# about 1.6 ms at the recorded 10 GB/s pageable rate), then on the host the column scaling
# (~1 ms), LAPACK's condition estimate on L in Fortran order (2 ms on this 2-core machine; the
# C-ordered L copied first took 8) and the triangular solves (0.3 ms). An assumption until the
# next card measures it (``breakdown.host_s``; ``host_factor_s`` the old host path beside it).
H200_HOST_DENSE_S = 0.008


def flops(m: int, n: int, passes: int, triangle: bool) -> dict[str, float]:
    """Useful and executed flops of a normal-equations solve making ``passes`` reads of A (the Gram
    pass and the refinement passes); ``triangle``: the Gram by triangular panels (one GPU), else by
    full GEMMs."""
    from gpuprobe.tools.scale.device import gram_flops

    rest = 2 * m * n + max(0, passes - 1) * 4 * m * n
    gram = gram_flops(m, n) if triangle else 2 * m * n * n
    return {"useful": float(m * n * n + rest), "executed": float(gram + rest)}


def fractions(rates: dict[str, float], peaks: dict[str, float | None]) -> dict[str, float]:
    """Every rate (TFLOP/s, keys ending in ``_tflops``) as a fraction of every peak."""
    return {
        f"{k.removesuffix('_tflops')}_vs_{p}": v / peak
        for k, v in rates.items()
        if k.endswith("_tflops") and isinstance(v, float)
        for p, peak in peaks.items()
        if peak
    }


def judge(useful_tflops: float, peaks: dict[str, float | None]) -> dict[str, Any]:
    """Issue 30's goal for a useful rate: met or not, with the fraction and the peak it is
    judged against."""
    peak = peaks.get(GOAL_PEAK)
    frac = useful_tflops / peak if peak else None
    return {
        "judged": f"warm useful rate vs the {GOAL_PEAK} peak ({peak} TFLOP/s)",
        "target": GOAL_FRACTION,
        "fraction": frac,
        "met": None if frac is None else frac >= GOAL_FRACTION,
        "why_this_peak": (
            "useful work is the solve's arithmetic; the fp64 tensor peak is reached only by "
            "GEMM, and a Gram by GEMM executes 2mn² for mn² useful ((k+1)mn²/k by triangular "
            "panels): 0.6 of the tensor peak would need the whole solve, memory-bound passes "
            "and n × n work included, to run as a triangular GEMM at near-peak DGEMM speed"
        ),
    }


def predict(
    m: int,
    n: int,
    passes: int,
    gram_tflops: float,
    gemv_gbs: float,
    host_s: float,
) -> dict[str, float]:
    """Seconds of a warm one-GPU solve from ceilings: the Gram's products at ``gram_tflops``
    (executed), each GEMV over A (Aᵀb; r = b − Ax and Aᵀr per further pass) at ``gemv_gbs``,
    and the host's n × n work."""
    from gpuprobe.tools.scale.device import gram_flops

    gram_s = gram_flops(m, n) / (gram_tflops * 1e12)
    gemvs = 1 + 2 * max(0, passes - 1)
    gemv_s = gemvs * (8.0 * m * n) / (gemv_gbs * 1e9)
    total = gram_s + gemv_s + host_s
    useful = flops(m, n, passes, True)["useful"]
    return {
        "gram_s": gram_s,
        "gemv_s": gemv_s,
        "host_s": host_s,
        "solve_s": total,
        "useful_tflops": useful / total / 1e12,
    }


def check(out: Path) -> int:
    """The dry run: the API in place, the arithmetic, and the H200 prediction."""
    import gpuprobe
    from gpuprobe.platform.hardware.specs import spec_for
    from gpuprobe.tools.scale import device

    assert callable(gpuprobe.lstsq), "gpuprobe.lstsq is missing"
    assert spec_for("NVIDIA H100 80GB HBM3").fp64_tensor, "no fp64 tensor peak for the H100"
    assert callable(device.CupyOps.gemm) and device.gram_flops(4, 2) == 32
    m, n = 1_000_000, 1024
    rec = H200_RECORDED_1126
    then = predict(m, n, 2, rec["gram_tflops"], rec["gemv_gbs"], rec["host_s"])
    other_s = rec["solve_s"] - then["solve_s"]  # what the model leaves out (7.5 ms then)
    assert 0 <= other_s < 0.01, "the model no longer explains the 2026-11-26 solve"
    est = predict(m, n, 2, rec["gram_tflops"], rec["gemv_gbs"], H200_HOST_DENSE_S)
    useful = flops(m, n, 2, True)["useful"]
    est["solve_s"] += other_s
    est["useful_tflops"] = useful / est["solve_s"] / 1e12
    goal = judge(est["useful_tflops"], dict(H200_PEAKS))
    print(
        f"H200 estimate, normal {m}x{n}, from the ceilings recorded on 2026-11-26:\n"
        f"  solve {est['solve_s'] * 1e3:.0f} ms (was {H200_RECORDED['old_solve_s'] * 1e3:.0f}, "
        f"then {rec['solve_s'] * 1e3:.0f}): Gram {est['gram_s'] * 1e3:.1f}, GEMVs "
        f"{est['gemv_s'] * 1e3:.1f},\n  n×n {est['host_s'] * 1e3:.1f} (assumed; "
        f"{rec['host_s'] * 1e3:.1f} then), other {other_s * 1e3:.1f} (as then)\n"
        f"  {est['useful_tflops']:.1f} TFLOP/s useful = {goal['fraction']:.2f} of the "
        f"{GOAL_PEAK} peak (goal {GOAL_FRACTION})"
    )
    out.write_text(json.dumps({"check": "ok", "h200_estimate": est, "goal": goal}) + "\n")
    return 0


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

    if args.check:
        return check(args.out)
    try:
        import cupy as cp
    except ImportError as exc:
        print(f"CuPy is not installed here: {exc}", file=sys.stderr)
        return 1
    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.rows, args.cols))
    x_true = rng.standard_normal(args.cols)
    b = a @ x_true + 1e-6 * rng.standard_normal(args.rows)
    out: dict[str, Any] = {"rows": args.rows, "cols": args.cols, "methods": {}}
    for method in ("normal", "tsqr"):
        t0 = time.perf_counter()
        x, report = gpuprobe.lstsq(cp.asarray(a), cp.asarray(b), method=method, reference="numpy")
        wall = time.perf_counter() - t0
        err = float(np.max(np.abs(x - x_true)))
        out["methods"][method] = {
            "wall_s": round(wall, 3),
            "max_abs_error_vs_truth": err,
            "report": report.to_dict(),
        }
        print(
            f"{method}: {wall:.2f} s wall, solve {report.solve_s:.3f} s, numpy "
            f"{report.reference_s or 0:.2f} s, max |x - x_true| {err:.1e}"
        )
    args.out.write_text(json.dumps(out, indent=1, default=str) + "\n")  # phase 1 kept if 2 fails
    out["fp64_throughput"] = fp64_throughput(args.big_rows, args.big_cols)
    args.out.write_text(json.dumps(out, indent=1, default=str) + "\n")
    return 0


def _cupy_seconds(fn: Any, reps: int = 10) -> float:
    """Median seconds of ``fn`` on the GPU: CUDA events around each call, after a warm-up."""
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
    return statistics.median(times)


def _ceilings(a: Any) -> dict[str, Any]:
    """The kernels the solve is made of, and the plain ones beside them, on this card."""
    import cupy as cp

    from gpuprobe.tools.scale import device

    m, n = (int(v) for v in a.shape)
    blk = a[:OLD_BLOCK_ROWS]
    rows = int(blk.shape[0])
    out: dict[str, Any] = {"block_rows": rows}
    out["dgemm_tflops"] = 2.0 * m * n * n / _cupy_seconds(lambda: a.T @ a) / 1e12
    out["dgemm_block_tflops"] = 2.0 * rows * n * n / _cupy_seconds(lambda: blk.T @ blk) / 1e12
    try:
        from cupy import cublas

        syrk_s = _cupy_seconds(lambda: cublas.syrk("T", a))
        out["dsyrk_useful_tflops"] = 1.0 * m * n * n / syrk_s / 1e12
    except Exception as exc:  # an older CuPy without cupy.cublas.syrk
        out["dsyrk"] = f"unavailable: {type(exc).__name__}: {exc}"
    ops = device.CupyOps(int(cp.cuda.Device().id))
    split = device.gram_split(m, n, ops.free_bytes() * device.DEVICE_WORK_FRACTION)
    plan = device.gram_plan(m, n, n, split)
    ones = cp.ones(split)

    def gram() -> Any:
        work = cp.zeros((split, n, n))
        for call in plan:
            ops.gemm(call, a, work)
        return work.reshape(split, n * n).T @ ones

    gram_s = _cupy_seconds(gram)
    out.update(
        gram_split=split,
        gram_products=len(plan),
        gram_s=gram_s,
        gram_executed_tflops=device.gram_flops(m, n) / gram_s / 1e12,
        gram_useful_tflops=1.0 * m * n * n / gram_s / 1e12,
    )
    v = cp.ones(m)
    gemv_s = _cupy_seconds(lambda: a.T @ v)
    out.update(gemv_s=gemv_s, gemv_gbs=8.0 * m * n / gemv_s / 1e9)
    return out


def _dense_s(g: Any, factor: Callable[[Any], Any]) -> float:
    """Seconds of a normal solve's n × n work for the Gram ``g`` (NumPy), as the solver does it:
    column scaling, the Cholesky factor by ``factor`` (the session's: on the GPU for a CuPy A),
    LAPACK's condition estimate, the triangular solves of the first solve and of one refinement
    step; best of 3."""
    import numpy as np

    from gpuprobe.tools.scale import solvers as S

    c = np.ones(g.shape[0])
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        d = S._column_scale(np.diagonal(g).copy())
        gs = g * d[:, None]
        gs *= d
        chol = factor(gs)
        S._kappa_from_cholesky(chol.lower, gs)
        chol.solve(chol.solve(c * d))
        times.append(time.perf_counter() - t0)
    return min(times)


def fp64_throughput(m: int, n: int) -> dict[str, Any]:
    """Phase 2: the normal-equations solve's fp64 flop rate, its ceilings and where its time goes."""
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
    runs: dict[str, Any] = {}
    for label in ("cold", "warm"):
        x, report = gpuprobe.lstsq(a, b, method="normal")
        err = float(np.linalg.norm(x - x_true.get()) / np.linalg.norm(x_true.get()))
        triangle = report.engine.cluster == "in-process" and report.engine.kind == "gpu"
        f = flops(m, n, report.passes, triangle)
        rates = {f"{k}_tflops": v / report.solve_s / 1e12 for k, v in f.items()}
        runs[label] = {
            "solve_s": report.solve_s,
            "setup_s": report.setup_s,
            "wall_s": report.wall_s,
            "engine": f"{report.engine.cluster}: {report.engine_reason}",
            "row_blocks": report.row_blocks,
            "passes_over_a": report.passes,
            "refinement_steps": report.refinement_steps,
            "rel_error_vs_truth": err,
            **rates,
            "fractions": fractions(rates, peaks),
        }
    warm = runs["warm"]
    ceilings = _ceilings(a)
    from gpuprobe.tools.scale import device as D
    from gpuprobe.tools.scale import solvers as S

    gram = (a.T @ a).get()
    host_s = _dense_s(gram, functools.partial(D.device_cholesky, D.CupyOps(0)))
    host_only_s = _dense_s(gram, S._Cholesky)  # as before 2026-11-26: factored on the host
    model = predict(
        m, n, warm["passes_over_a"], ceilings["gram_executed_tflops"], ceilings["gemv_gbs"], host_s
    )
    model["other_s"] = warm["solve_s"] - model["solve_s"]
    goal = judge(warm["useful_tflops"], peaks)
    frac = goal["fraction"]
    print(
        f"fp64 normal {m}x{n} on {name}:\n"
        f"  warm solve {warm['solve_s'] * 1e3:.1f} ms (cold "
        f"{runs['cold']['solve_s'] * 1e3:.1f}), set-up {warm['setup_s'] * 1e3:.1f} ms\n"
        f"  {warm['useful_tflops']:.1f} TFLOP/s useful, {warm['executed_tflops']:.1f} "
        f"executed; peaks {peaks['fp64']} (fp64), {peaks['fp64_tensor']} (tensor)\n"
        f"  goal: {'n/a' if frac is None else f'{frac:.2f}'} of the {GOAL_PEAK} peak "
        f"(target {GOAL_FRACTION}): {'met' if goal['met'] else 'NOT met'}\n"
        f"  Gram {ceilings['gram_s'] * 1e3:.1f} ms ({ceilings['gram_executed_tflops']:.1f} "
        f"TFLOP/s executed), DGEMM AᵀA {ceilings['dgemm_tflops']:.1f} TFLOP/s\n"
        f"  GEMV {ceilings['gemv_gbs']:.0f} GB/s, n×n {host_s * 1e3:.1f} ms (factored on "
        f"the host: {host_only_s * 1e3:.1f}),\n  other {model['other_s'] * 1e3:.1f} ms; error "
        f"{warm['rel_error_vs_truth']:.1e}"
    )
    model["host_factor_s"] = host_only_s
    return {
        "device": name,
        "rows": m,
        "cols": n,
        "gib": round(m * n * 8 / 2**30, 2),
        "peaks_tflops": peaks,
        "peak_source": spec.source if spec else None,
        **{k: warm[k] for k in ("solve_s", "setup_s", "wall_s", "row_blocks", "engine")},
        "passes_over_a": warm["passes_over_a"],
        "refinement_steps": warm["refinement_steps"],
        "rel_error_vs_truth": warm["rel_error_vs_truth"],
        "useful_tflops": warm["useful_tflops"],
        "executed_tflops": warm["executed_tflops"],
        "fractions": warm["fractions"] | fractions(ceilings_rates(ceilings), peaks),
        "runs": runs,
        "ceilings": ceilings,
        "breakdown": model,
        "goal": goal,
    }


def ceilings_rates(ceilings: dict[str, Any]) -> dict[str, float]:
    """The ceilings that are rates (TFLOP/s)."""
    return {k: v for k, v in ceilings.items() if k.endswith("_tflops") and isinstance(v, float)}


if __name__ == "__main__":
    sys.exit(main())
