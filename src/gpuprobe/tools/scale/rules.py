"""The rules of ``gpuprobe scale`` and ``gpuprobe.lstsq``, one tuple per result they judge.

:data:`RULES_LSTSQ` judges what one least-squares solve saw (:class:`LstsqFacts`: the switch from
the normal equations, a rank deficiency, paused workers, local-sgd's distance from the exact
solution, the comparison with a reference); :data:`RULES_SWEEP` judges a sweep over worker counts
(:class:`SweepFacts`: its rows). Each threshold is a named constant with its source.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import Rule, rule
from gpuprobe.tools.scale.model import ScaleRow
from gpuprobe.tools.scale.solvers import EPS64, NORMAL_MAX_KAPPA2_EPS, _Unsafe

__all__ = [
    "AGREEMENT_KAPPA2_FACTOR",
    "CONTENTION_MAX_COMM_SHARE",
    "CONTENTION_MIN_WALL_S",
    "CPU_PER_WORKER_WARN",
    "EXACT_ERROR_OK",
    "PARALLEL_EFFICIENCY_WARN",
    "RULES_LSTSQ",
    "RULES_SWEEP",
    "LstsqFacts",
    "SweepFacts",
    "accuracy",
    "cpu_contention",
    "efficiency",
    "expected_error_bound",
    "local_sgd_approximate",
    "normal_switched",
    "rank_deficient",
    "reference",
    "sweep_local_sgd_approximate",
    "sweep_rank_deficient",
    "worker_paused",
]

# Relative error against a reference that counts as agreement for a well-conditioned problem
# (the acceptance bound for 400,000 × 1,000).
EXACT_ERROR_OK = 1e-10


# Any backward-stable least-squares solver is off by O(κ·eps + κ²·eps·‖r‖/(‖A‖‖x‖)) (Higham 2002,
# Theorem 20.1); two of them may differ by this factor × κ²·eps and both be right.
AGREEMENT_KAPPA2_FACTOR = 10.0


def expected_error_bound(kappa: float | None) -> float:
    """The relative difference two correct float64 solvers may show: max(1e-10, 10·κ²·eps)."""
    if kappa is None or not math.isfinite(kappa):
        return math.inf
    return max(EXACT_ERROR_OK, AGREEMENT_KAPPA2_FACTOR * kappa * kappa * EPS64)


# Parallel efficiency below which adding workers is reported as a warning: gpuprobe's choice, a
# third of each added worker's time lost to communication, waiting or imbalance.
PARALLEL_EFFICIENCY_WARN = 0.67
# CPU each worker got during a run, in cores (process CPU seconds / wall seconds / workers), below
# which other processes are taking the cores and the speedups say more about them than about the
# method: gpuprobe's choice (a BLAS-bound worker on an idle core measures 0.9-1.0 here).
CPU_PER_WORKER_WARN = 0.8
# Runs judged for contention: at least this long and with at most this communication share.
# Shorter runs are mostly scheduling and the client's n × n work, when workers idle by design.
CONTENTION_MIN_WALL_S = 2.0
CONTENTION_MAX_COMM_SHARE = 0.2


@dataclass(frozen=True)
class LstsqFacts:
    """What one solve saw, for :data:`RULES_LSTSQ`."""

    requested: str  # the method asked for
    unsafe: _Unsafe | None = None  # why the normal equations were abandoned for tsqr
    # (rank, columns, the scaled σ cutoff, the smallest scaled σ) when A is rank-deficient
    deficient: tuple[int, int, float, float | None] | None = None
    paused: tuple[dict[str, Any], ...] = ()  # Dask workers not running after the solve
    sgd: tuple[float, float, float] | None = None  # local-sgd: (distance, ‖r‖, exact ‖r‖)
    reference: str | None = None  # the reference's name, when one was asked for
    reference_skipped: str | None = None  # why the reference was not computed
    reference_error: float | None = None  # relative error against it (exact methods only)
    cond: float | None = None  # the κ the agreement is judged at


@dataclass(frozen=True)
class SweepFacts:
    """A sweep's rows, for :data:`RULES_SWEEP`."""

    rows: list[ScaleRow]
    sizes: list[int]  # the worker counts swept, in order
    cores: int = 0  # cores on the machine (0: unknown)
    row_blocks: int = 0  # row blocks of A (0: unknown)
    # a solve's lstsq-rank-deficient finding (the sweep keeps its warning off the terminal)
    deficient: Finding | None = None


def _ev(**values: float | int | None) -> tuple[Evidence, ...]:
    """Evidence without units (ratios, counts, norms), in the order given."""
    return tuple(Evidence(k, v) for k, v in values.items())


# -- one solve --------------------------------------------------------------------------------


@rule("lstsq-normal-switched-to-tsqr", applies=lambda f: f.unsafe is not None)
def normal_switched(f: LstsqFacts) -> list[Finding]:
    """The normal equations were unsafe here, so the solve switched to tsqr."""
    assert f.unsafe is not None
    kappa = f.unsafe.kappa
    return [
        Finding(
            id="lstsq-normal-switched-to-tsqr",
            status=Status.WARN if f.requested == "normal" else Status.INFO,
            title=f"normal equations unsafe here ({f.unsafe.reason}): solved with tsqr instead",
            evidence=(
                Evidence("cond_estimate", kappa),
                Evidence("kappa2_eps", None if kappa is None else kappa * kappa * EPS64),
                Evidence("threshold_kappa2_eps", NORMAL_MAX_KAPPA2_EPS),
            ),
            fix="method='tsqr' skips the wasted Gram pass; rescaling or dropping nearly dependent "
            "columns of A makes the normal equations safe again",
            group="lstsq",
        )
    ]


@rule("lstsq-rank-deficient", applies=lambda f: f.deficient is not None)
def rank_deficient(f: LstsqFacts) -> list[Finding]:
    """A has fewer independent columns than columns: the minimum-norm solution was returned."""
    assert f.deficient is not None
    rank, n, cut, smin = f.deficient
    return [
        Finding(
            id="lstsq-rank-deficient",
            status=Status.WARN,
            title=f"A has rank {rank} of {n} columns: the minimum-norm solution was "
            "returned; other solutions fit equally well",
            evidence=(
                Evidence("rank", rank),
                Evidence("columns", n),
                Evidence("sigma_cutoff_scaled", cut),
                Evidence("sigma_min_scaled", smin),
            ),
            fix="drop or merge the linearly dependent columns of A, or regularize "
            "(append sqrt(lam)*I rows to A and zeros to b)",
            group="lstsq",
        )
    ]


@rule("lstsq-worker-paused", applies=lambda f: bool(f.paused))
def worker_paused(f: LstsqFacts) -> list[Finding]:
    """Dask workers not running after the solve: a paused worker is over its memory limit."""
    bad = f.paused
    w = bad[0]
    mem, limit = w["memory"], w["memory_limit"]
    return [
        Finding(
            id="lstsq-worker-paused",
            status=Status.WARN,
            title=f"{len(bad)} Dask worker(s) not running after the solve ({w['address']} "
            f"{w['status']}): a paused worker is over its memory limit and takes no work",
            evidence=(
                Evidence("workers_not_running", len(bad)),
                Evidence("memory", mem, "B"),
                Evidence("memory_limit", limit, "B"),
            ),
            fix="smaller row blocks (chunk_rows=...), more workers, or a larger "
            "--memory-limit for `dask worker`",
            group="lstsq",
        )
    ]


@rule("lstsq-local-sgd-approximate", applies=lambda f: f.sgd is not None)
def local_sgd_approximate(f: LstsqFacts) -> list[Finding]:
    """local-sgd is E6's approximation (docs/experiments.md#e6): how far it is from the exact
    solution."""
    assert f.sgd is not None
    dist, resid, exact_resid = f.sgd
    return [
        Finding(
            id="lstsq-local-sgd-approximate",
            status=Status.WARN if dist > EXACT_ERROR_OK else Status.INFO,
            title=f"local-sgd is an approximation: off the exact solution by {dist:.3g} "
            f"(relative); residual {resid:.6g} vs exact {exact_resid:.6g}",
            evidence=_ev(
                distance_from_exact=dist, residual_norm=resid, exact_residual_norm=exact_resid
            ),
            fix="method='normal' gives the exact solution in one pass plus refinement",
            group="lstsq",
        )
    ]


@rule(
    "lstsq-reference-skipped",
    "lstsq-reference-agreement",
    applies=lambda f: f.reference is not None,
)
def reference(f: LstsqFacts) -> list[Finding]:
    """The comparison with the reference: skipped (and why), or agreement within what two
    correct solvers may differ by at this κ."""
    if f.reference_skipped is not None:
        return [
            Finding(
                id="lstsq-reference-skipped",
                status=Status.SKIPPED,
                title=f"no comparison with numpy.linalg.lstsq: {f.reference_skipped}",
                fix="pass reference=<a known solution> instead",
                group="lstsq",
            )
        ]
    if f.reference_error is None:
        return []
    err, kappa = f.reference_error, f.cond
    bound = expected_error_bound(kappa)
    ok = err <= bound
    return [
        Finding(
            id="lstsq-reference-agreement",
            status=Status.OK if ok else Status.WARN,
            title=f"solution {'agrees' if ok else 'disagrees'} with {f.reference}: relative error "
            f"{err:.2g} ({'≤' if ok else '>'} {bound:.2g} expected at this κ)",
            evidence=_ev(relative_error=err, expected_bound=bound, cond_estimate=kappa),
            fix="" if ok else "method='tsqr' (stable at any κ); check the reference's rcond",
            group="lstsq",
        )
    ]


# In the order a solve meets them: the switch, the solve's rank, the workers after it, local-sgd
# beside the exact solution, the reference.
RULES_LSTSQ: tuple[Rule, ...] = (
    normal_switched,
    rank_deficient,
    worker_paused,
    local_sgd_approximate,
    reference,
)


# -- a sweep over worker counts ---------------------------------------------------------------


@rule("scale-lstsq-accuracy")
def accuracy(ctx: SweepFacts) -> list[Finding]:
    """The exact methods' worst disagreement with numpy.linalg.lstsq, against what κ allows."""
    rows = ctx.rows
    errs = [(r, r.error_vs_numpy) for r in rows if r.exact and r.error_vs_numpy is not None]
    if not errs:
        return []
    worst, err = max(errs, key=lambda p: p[1] / expected_error_bound(p[0].cond_estimate))
    bound = expected_error_bound(worst.cond_estimate)
    where = f"{worst.requested}, {worst.workers} worker(s)"
    if err <= bound:
        title = f"exact methods agree with numpy.linalg.lstsq: worst relative error {err:.2g} "
        title += f"({where})"
    else:
        title = f"off numpy.linalg.lstsq by {err:.2g} ({where}), more than the {bound:.2g} expected"
    ok = err <= bound
    evidence = _ev(worst_error=err, expected_bound=bound, cond_estimate=worst.cond_estimate)
    fix = "" if ok else "report this with the --json output; use --method tsqr meanwhile"
    status = Status.OK if ok else Status.FAIL
    return [Finding("scale-lstsq-accuracy", status, title, evidence, fix, group="scale")]


@rule("scale-lstsq-efficiency")
def efficiency(ctx: SweepFacts) -> list[Finding]:
    """Each exact method's parallel efficiency from the fewest to the most workers; where no
    count gave more workers a row block than the fewest (one block), that there is none."""
    rows, sizes = ctx.rows, ctx.sizes
    out = []
    top = [r for r in rows if len(sizes) > 1 and r.workers == sizes[-1] and r.exact]
    if top and all(r.efficiency is None for r in top):
        blocks = ctx.row_blocks
        title = (
            f"{blocks} row block{'s' if blocks != 1 else ''}: no parallel efficiency (a block "
            f"is one worker's task, so {sizes[-1]} workers had no more to share than {sizes[0]})"
        )
        fix = "give --chunk-rows a smaller count, for at least as many row blocks as workers"
        ev = _ev(row_blocks=ctx.row_blocks or None, workers=sizes[-1], fewest_workers=sizes[0])
        return [Finding("scale-lstsq-efficiency", Status.INFO, title, ev, fix, "scale")]
    for r in top:
        if r.efficiency is None:
            continue
        low = r.efficiency < PARALLEL_EFFICIENCY_WARN
        title = (
            f"{r.requested}: parallel efficiency {r.efficiency:.0%} from {sizes[0]} to "
            f"{r.workers} workers"
            + (f" ({ctx.row_blocks} with a row block)" if 0 < ctx.row_blocks < r.workers else "")
            + f" (speedup {r.speedup:.2f}×, communication "
            f"{r.communication_share:.0%})"
        )
        evidence = _ev(
            efficiency=r.efficiency,
            speedup=r.speedup,
            communication_share=r.communication_share,
            threshold=PARALLEL_EFFICIENCY_WARN,
        )
        fix = "larger row blocks (--chunk-rows) or more rows per worker" if low else ""
        status = Status.WARN if low else Status.OK
        out.append(
            Finding(
                "scale-lstsq-efficiency", status, title, evidence, fix, "scale", subject=r.requested
            )
        )
    return out


@rule("scale-lstsq-local-sgd-approximate")
def sweep_local_sgd_approximate(ctx: SweepFacts) -> list[Finding]:
    """local-sgd at the most workers: how far from numpy, and the exact method's time beside it."""
    rows, sizes = ctx.rows, ctx.sizes
    out = []
    for r in rows:
        if r.exact or r.error_vs_numpy is None or r.workers != sizes[-1]:
            continue
        exact = [x for x in rows if x.exact and x.workers == r.workers]
        fastest = min(exact, key=lambda x: x.wall_s) if exact else None
        extra = (
            ""
            if fastest is None
            else (f"; {fastest.requested} is exact in {fastest.wall_s:.3g} s vs {r.wall_s:.3g} s")
        )
        out.append(
            Finding(
                id="scale-lstsq-local-sgd-approximate",
                status=Status.WARN,
                title=f"local-sgd is an approximation: off numpy.linalg.lstsq by "
                f"{r.error_vs_numpy:.3g} (relative){extra}",
                evidence=(
                    Evidence("error_vs_numpy", r.error_vs_numpy),
                    Evidence("wall", r.wall_s, "s"),
                ),
                fix="--method normal",
                group="scale",
            )
        )
    return out


@rule("scale-lstsq-cpu-contention")
def cpu_contention(ctx: SweepFacts) -> list[Finding]:
    """Workers that got too little of a core: other processes shared the machine."""
    rows, cores = ctx.rows, ctx.cores
    starved = [
        r
        for r in rows
        if r.cpu_per_worker is not None
        and r.cpu_per_worker < CPU_PER_WORKER_WARN
        and r.wall_s >= CONTENTION_MIN_WALL_S
        and r.communication_share <= CONTENTION_MAX_COMM_SHARE
    ]
    if not starved:
        return []
    low = min(starved, key=lambda r: r.cpu_per_worker or 0.0)
    load = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    title = (
        f"workers got as little as {low.cpu_per_worker:.2f} of a core each ({low.requested} on "
        f"{low.workers}): other processes share the {cores} cores, so times and speedups "
        "understate the method"
    )
    evidence = (
        Evidence("cpu_per_worker", low.cpu_per_worker, "cores"),
        Evidence("load_average_1min", load),
        Evidence("cores", cores),
        Evidence("threshold", CPU_PER_WORKER_WARN, "cores"),
    )
    fix = (
        "run the sweep on an idle machine (compare the `uptime` load average with the core "
        "count), or sweep fewer workers than there are free cores"
    )
    return [Finding("scale-lstsq-cpu-contention", Status.WARN, title, evidence, fix, "scale")]


# In the order the sweep's report lists them.
@rule("lstsq-rank-deficient", applies=lambda f: f.deficient is not None)
def sweep_rank_deficient(ctx: SweepFacts) -> list[Finding]:
    """A rank-deficient A, found by a solve of the sweep: its finding once, in place of the
    RankDeficiencyWarning each solve would print."""
    return [] if ctx.deficient is None else [ctx.deficient]


RULES_SWEEP: tuple[Rule, ...] = (
    accuracy,
    efficiency,
    sweep_local_sgd_approximate,
    cpu_contention,
    sweep_rank_deficient,
)
