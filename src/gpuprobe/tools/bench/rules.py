"""The rules of ``gpuprobe bench``: those that concern every workload (workers and points that
failed, wrong results, sizes out of memory, a busy host), then each workload's own (in its module
under :mod:`gpuprobe.tools.bench.workloads`): every workload's checks (what is wrong with the
figures: far below the hardware's peak, E8's misleading host clock, slow copies), then every
workload's advice (lower precisions, where the GPU starts to win, what a per-step copy costs, two
products at once). E-codes: docs/experiments.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import Rule, apply_rules, rule
from gpuprobe.platform.hardware.load import host_busy_finding
from gpuprobe.platform.inventory import Inventory
from gpuprobe.platform.measurement import SPREAD_WARN_FRACTION
from gpuprobe.platform.timing import NAIVE_TIMER
from gpuprobe.tools.bench.model import BenchResult, WorkerRun
from gpuprobe.tools.bench.workloads import WORKLOADS, by_name
from gpuprobe.tools.bench.workloads.base import GROUP, BenchContext, finding

__all__ = [
    "COMMON_RULES",
    "RULES",
    "RUNS_DISAGREE_NAMED",
    "failures",
    "host_busy",
    "judge",
    "runs_disagree",
]


@rule("bench-worker-failed", "bench-point-failed", "bench-wrong-result", "bench-out-of-memory")
def failures(ctx: BenchContext) -> list[Finding]:
    """Workers that failed, points that failed, results off against float64 (each workload's
    ``error_limit``), sizes skipped for lack of memory."""
    out = [
        finding(
            "bench-worker-failed",
            Status.FAIL,
            f"{w.framework} on {w.device}: {w.error}",
            [Evidence("error", w.error)],
            fix="run 'gpuprobe doctor' for this framework and device",
            subject=f"{w.framework} {w.device}",
        )
        for w in ctx.workers
        if w.error
    ]
    for r in ctx.results:
        if r.status == "error":
            out.append(
                finding(
                    "bench-point-failed",
                    Status.WARN,
                    f"{r.workload} {r.case} on {r.framework} {r.device} (size {r.size}): {r.reason}",
                    [Evidence("error", r.reason)],
                    subject=f"{r.framework} {r.device}",
                )
            )
        err = r.values.get("rel_error")
        workload = by_name(r.workload)
        limit = workload.error_limit(r.case) if workload is not None else None
        if err is not None and limit is not None and not err <= limit:
            out.append(
                finding(
                    "bench-wrong-result",
                    Status.FAIL,
                    f"{r.workload} {r.case} on {r.framework} {r.device} (size {r.size}) is off by "
                    f"{err:.3g} against float64 (limit {limit:g})",
                    [Evidence("relative_error", err), Evidence("limit", limit)],
                    fix="run 'gpuprobe doctor'; if it repeats, the card or the library is faulty",
                    subject=f"{r.framework} {r.device}",
                )
            )
    oom = [r for r in ctx.results if r.status == "out-of-memory"]
    if oom:
        out.append(
            finding(
                "bench-out-of-memory",
                Status.INFO,
                f"{len(oom)} size(s) skipped for lack of memory: "
                + ", ".join(
                    sorted(
                        {f"{r.workload} {r.case} {r.size} ({r.framework} {r.device})" for r in oom}
                    )[:6]
                ),
                [Evidence("skipped", len(oom))],
                fix="close other programs using the device, or run on a larger card",
            )
        )
    return out


def _host_load(ctx: BenchContext, framework: str, device: str) -> tuple[float | None, int | None]:
    """(cores other processes kept busy while this pair's worker ran, the host's cores)."""
    inv = ctx.inventory
    cores = (inv.host.usable_cores or inv.host.logical_cores) if inv is not None else None
    w = next((w for w in ctx.workers if (w.framework, w.device) == (framework, device)), None)
    return (w.others_cores if w is not None else None), cores


@rule("bench-host-busy")
def host_busy(ctx: BenchContext) -> list[Finding]:
    """Each CPU worker whose figures other processes on the host slowed."""
    out = []
    for w in ctx.workers:
        if w.device != "cpu":
            continue
        others, cores = _host_load(ctx, w.framework, w.device)
        f = host_busy_finding(
            "bench-host-busy",
            f"{w.framework} cpu",
            others,
            cores,
            effect="its CPU figures are slowed, multi-threaded ones (matmul) the most",
            fix="re-run 'gpuprobe bench' when the machine is idle (see 'gpuprobe top')",
            group=GROUP,
            subject=f"{w.framework} cpu",
        )
        if f is not None:
            out.append(f)
    return out


# Figures named in the finding's title; the rest are counted.
RUNS_DISAGREE_NAMED = 4


@rule("bench-runs-disagree")
def runs_disagree(ctx: BenchContext) -> list[Finding]:
    """Each framework and device with figures whose runs never agreed (the measurement's
    ``trusted`` flag), with the load other processes put on the host meanwhile. E8's naive host
    clock (``scale``'s ``naive`` row) is wrong by design, and its spread is not judged."""
    by_pair: dict[tuple[str, str], list[BenchResult]] = {}
    for r in ctx.results:
        m = r.measurement
        if r.ok and m is not None and not m.trusted and m.timer != NAIVE_TIMER:
            by_pair.setdefault((r.framework, r.device), []).append(r)
    out = []
    for (fw, dev), rs in by_pair.items():
        others, cores = _host_load(ctx, fw, dev)
        load = (
            f"other processes kept {others:.1f} of {cores} cores busy"
            if others is not None and cores
            else "the host's load is unknown"
        )
        names = [f"{r.workload} {r.case}" + (f" {r.size}" if r.size else "") for r in rs]
        more = len(names) - RUNS_DISAGREE_NAMED
        listed = ", ".join(names[:RUNS_DISAGREE_NAMED]) + (f" and {more} more" if more > 0 else "")
        measured = sum(x.ok for x in ctx.results if (x.framework, x.device) == (fw, dev))
        out.append(
            finding(
                "bench-runs-disagree",
                Status.WARN,
                f"{fw} {dev}: {len(rs)} of {measured} figures are not trustworthy, their runs "
                f"never agreed ({load}): {listed}",
                [
                    Evidence("untrusted", len(rs)),
                    Evidence("measured", measured),
                    Evidence(
                        "others_cores", round(others, 2) if others is not None else None, "cores"
                    ),
                    Evidence("host_cores", cores, "cores"),
                    Evidence("spread_limit", SPREAD_WARN_FRACTION),
                ],
                fix="re-run 'gpuprobe bench' when the machine is idle (see 'gpuprobe top')"
                + (
                    ", or give it fewer threads than there are idle cores "
                    "(OMP_NUM_THREADS=1 gpuprobe bench)"
                    if dev == "cpu"
                    else "; look for another process on the card ('nvidia-smi')"
                ),
                subject=f"{fw} {dev}",
            )
        )
    return out


COMMON_RULES: tuple[Rule, ...] = (failures, host_busy, runs_disagree)
# The findings' order is the rules' order: the common ones, every workload's checks, every
# workload's advice (workloads in run order).
RULES: tuple[Rule, ...] = (
    *COMMON_RULES,
    *(r for w in WORKLOADS for r in w.checks),
    *(r for w in WORKLOADS for r in w.advice),
)


def judge(
    results: Sequence[BenchResult], workers: Sequence[WorkerRun], inv: Inventory | None = None
) -> list[Finding]:
    """Every finding of one run."""
    return apply_rules(RULES, BenchContext(results, workers, inv))
