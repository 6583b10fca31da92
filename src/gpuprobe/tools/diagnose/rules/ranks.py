"""The rules that judge the ranks of one distributed job
(:func:`~gpuprobe.tools.diagnose.ranks.diagnose_ranks`): the **straggler**, the rank the others
wait for inside the collectives, and the **exposed communication**, what is not overlapped with
compute. Each rule judges a :class:`RanksContext`; the judge is ``apply_rules(RULES_RANKS, ctx)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import Rule, rule
from gpuprobe.tools.diagnose.ranks_model import CollectiveWait, RankRow
from gpuprobe.tools.diagnose.rules._common import as_information
from gpuprobe.tools.diagnose.rules.startup import ONE_TIME_WARN_FRACTION

__all__ = [
    "EXPOSED_COMM_WARN_FRACTION",
    "RULES_RANKS",
    "STRAGGLER_WAIT_WARN_FRACTION",
    "RanksContext",
    "cold_ranks",
    "cold_ranks_apart",
    "exposed_communication",
    "straggler",
]

STRAGGLER_WAIT_WARN_FRACTION = 0.05  # of the median step time: the other ranks' mean wait per
# step for the straggler worth a look; gpuprobe's choice (HTA's straggler analysis only ranks)
EXPOSED_COMM_WARN_FRACTION = 0.10  # of the median step time: communication not overlapped with
# compute and not waiting for a late rank; gpuprobe's choice (a tenth of the step is worth it)
GROUP = "ranks"  # the findings' group


@dataclass(frozen=True)
class RanksContext:
    """What the ranks' rules judge: each rank's row (sorted by rank, with its waits), the
    straggler (None: fewer than two ranks, or none timed) and the collectives matched on every
    rank (empty: none is common to all)."""

    rows: tuple[RankRow, ...]
    straggler: int | None = None
    collectives: tuple[CollectiveWait, ...] = ()


def _median(values: list[float]) -> float:
    return float(np.median(values)) if values else 0.0


@rule("straggler")
def straggler(ctx: RanksContext) -> list[Finding]:
    """``straggler``: the rank the others wait for at the collectives, how long, and which part
    of its step is longer (GPU compute, host side, a late start); skipped with fewer than two
    ranks."""
    return [_straggler_finding(list(ctx.rows), ctx.straggler, list(ctx.collectives))]


def _straggler_finding(
    rows: list[RankRow], straggler: int | None, colls: list[CollectiveWait]
) -> Finding:
    fid, group = "straggler", GROUP
    if straggler is None:
        return Finding(
            fid,
            Status.SKIPPED,
            "skipped: needs the traces of at least two ranks",
            group=group,
        )
    s = next(r for r in rows if r.rank == straggler)
    others = [r for r in rows if r.rank != straggler]
    step_med = _median([r.step_median_us for r in rows if r.step_median_us is not None])
    if not colls:
        return Finding(
            fid,
            Status.INFO,
            f"rank {straggler} has the slowest steps; no collective kernel is common to all ranks, "
            "so no rank waits for another on the GPU",
            evidence=(
                Evidence("step_median", s.step_median_us, "µs"),
                Evidence("step_median_all_ranks", step_med, "µs"),
            ),
            group=group,
        )
    # what the others lose per step, and which part of the straggler's own step is longer
    wait_per_step = s.per_step(s.caused_wait_us) / max(len(others), 1)
    med = {
        "compute": _median([r.per_step(r.compute_us) for r in others]),
        "host": _median([r.per_step(r.gpu_idle_in_steps_us) for r in others]),
        "wait": _median([r.per_step(r.comm_wait_us) for r in others]),
    }
    delta = {
        "compute": s.per_step(s.compute_us) - med["compute"],
        "host": s.per_step(s.gpu_idle_in_steps_us) - med["host"],
    }
    cpu_job = all(r.gpu_span_us is None for r in rows)
    if cpu_job:  # no GPU (gloo): the host's own work is the step outside its collectives
        own = _median([r.per_step(r.step_total_us - r.comm_us) for r in others])
        delta["host"] = s.per_step(s.step_total_us - s.comm_us) - own
    starts = [r.first_step_start_us for r in others if r.first_step_start_us is not None]
    late_start = (
        s.first_step_start_us - _median(starts)
        if s.first_step_start_us is not None and starts
        else None
    )
    mine = [c for c in colls if c.last_rank == straggler] or colls
    worst_coll = max(mine, key=lambda c: c.wait_us)
    candidates = {k: v for k, v in delta.items() if v > 0}
    if late_start is not None and late_start > 0:
        candidates["late start"] = late_start
    part = max(candidates, key=lambda k: candidates[k]) if candidates else "none"
    if cpu_job and part == "host":
        part = "own work"
    fixes = {
        "compute": f"rank {straggler} runs more GPU compute per step than the others: balance "
        "the work (sharding plan, uneven batches or sequence lengths, embedding tables per rank)",
        "host": f"rank {straggler}'s GPU idles longer per step: profile its host side "
        "(DataLoader workers, CPU contention, pinned memory, syncs) with gpuprobe diagnose "
        "on its trace",
        "own work": f"rank {straggler} works longer per step outside the collectives: look at "
        "its input pipeline (DataLoader workers), uneven batches and CPU contention with "
        "gpuprobe diagnose on its trace",
        "late start": f"rank {straggler} starts its steps late, so the delay is before the "
        "profiled step (data loading or the previous step): profile more steps "
        "(schedule active≥3) and diagnose its trace",
        "none": f"rank {straggler} arrives last at the collectives; profile more steps "
        "to see where it loses the time",
    }
    status = (
        Status.WARN
        if step_med > 0 and wait_per_step >= STRAGGLER_WAIT_WARN_FRACTION * step_med
        else Status.INFO
    )
    where = f"{worst_coll.name} #{worst_coll.occurrence}" + (
        f" of step {worst_coll.step}" if worst_coll.step is not None else ""
    )
    evidence = [
        Evidence("others_wait_per_step", wait_per_step, "µs"),
        Evidence("step_median", step_med, "µs"),
        Evidence("last_at", f"{s.last_arrivals}/{len(colls)} collectives"),
        Evidence("worst_collective_wait", worst_coll.wait_us, "µs"),
        Evidence("compute_vs_median", delta["compute"], "µs/step"),
        Evidence("gpu_idle_vs_median", delta["host"], "µs/step"),
        Evidence("own_wait_per_step", s.per_step(s.comm_wait_us), "µs"),
        Evidence("others_median_wait_per_step", med["wait"], "µs"),
    ]
    if late_start is not None:
        evidence.append(Evidence("step_start_vs_median", late_start, "µs"))
    part_text = {
        "compute": f"its GPU compute is {delta['compute']:,.0f} µs/step longer",
        "host": f"its GPU idles {delta['host']:,.0f} µs/step longer (host side)",
        "own work": f"its own work outside the collectives is {delta['host']:,.0f} µs/step "
        "longer (no GPU in the traces)",
        "late start": f"it starts the step {late_start or 0:,.0f} µs after the median rank",
        "none": "no part of its step is longer than the median rank's",
    }[part]
    return Finding(
        fid,
        status,
        f"rank {straggler} is the straggler: the other ranks wait {wait_per_step:,.0f} µs per "
        f"step for it, most in {where}; {part_text}",
        evidence=tuple(evidence),
        fix=fixes[part],
        group=group,
        subject=f"rank {straggler}",
        # the others' wait is what they would get back if the straggler kept up (on the CPU,
        # a collective's span on gloo's thread runs on into the next step: at most the
        # straggler's extra work comes back)
        gain=_gain(wait_per_step, delta["host"] if cpu_job else None, step_med),
    )


@rule("exposed-communication")
def exposed_communication(ctx: RanksContext) -> list[Finding]:
    """``exposed-communication``: communication not overlapped with compute per step (median
    rank), less the waits for late ranks; skipped without NCCL/RCCL kernels."""
    return [_exposed_finding(list(ctx.rows))]


def _exposed_finding(rows: list[RankRow]) -> Finding:
    fid, group = "exposed-communication", GROUP
    # overlap with compute is a GPU measure: a CPU rank's gloo spans have no compute to hide in
    with_comm = [r for r in rows if r.comm_us > 0 and r.gpu_span_us is not None]
    if not with_comm:
        cpu = any(r.comm_us > 0 for r in rows)
        return Finding(
            fid,
            Status.SKIPPED,
            "skipped: no GPU in the traces; the ranks' gloo collectives are timed (the comm "
            "column) and their waits name the straggler"
            if cpu
            else "skipped: no NCCL/RCCL communication kernels in the traces",
            group=group,
        )
    step_med = _median([r.step_median_us for r in rows if r.step_median_us is not None])
    # exposed = communication not overlapped with compute (HTA); the part of it that is not
    # waiting for a late rank is at most the communication's own time (comm − wait)
    exposed = _median([r.per_step(r.exposed_comm_us) for r in with_comm])
    transfer = _median(
        [r.per_step(min(r.exposed_comm_us, r.comm_us - r.comm_wait_us)) for r in with_comm]
    )
    comm = _median([r.per_step(r.comm_us) for r in with_comm])
    overlap = _median([r.overlap_fraction for r in with_comm if r.overlap_fraction is not None])
    wait = _median([r.per_step(r.comm_wait_us) for r in with_comm])
    frac = transfer / step_med if step_med > 0 else 0.0
    status = Status.WARN if frac >= EXPOSED_COMM_WARN_FRACTION else Status.OK
    waiting = f"; {wait:,.0f} µs of it is waiting for late ranks (straggler)" if wait > 0 else ""
    title = (
        f"{transfer:,.0f} µs per step of communication is not overlapped with compute "
        f"({100 * frac:.1f} % of the step, median rank), not counting waits for late ranks"
        if status is Status.WARN
        else f"communication exposed: {exposed:,.0f} µs per step (median rank){waiting}; "
        f"the transfers themselves expose {transfer:,.0f} µs ({100 * frac:.1f} % of the step)"
    )
    return Finding(
        fid,
        status,
        title,
        evidence=(
            Evidence("comm_per_step", comm, "µs"),
            Evidence("comm_overlapped", 100 * overlap, "%"),
            Evidence("exposed_per_step", exposed, "µs"),
            Evidence("waiting_per_step", wait, "µs"),
            Evidence("exposed_transfer_per_step", transfer, "µs"),
            Evidence("step_median", step_med, "µs"),
        ),
        fix="overlap collectives with compute: DDP(bucket_cap_mb=…, gradient_as_bucket_view=True), "
        "FSDP(backward_prefetch=BackwardPrefetch.BACKWARD_PRE, forward_prefetch=True), torchrec "
        "TrainPipelineSparseDist; or communicate less (fp16/bf16 gradient compression hook)",
        group=group,
        gain=frac if status is Status.WARN else None,
    )


# In the order the diagnosis lists them before sorting worst first: who is slow, then what the
# communication exposes.
@rule("cold-ranks")
def cold_ranks(ctx: RanksContext) -> list[Finding]:
    """The ranks whose traces are first passes: one-time start-up (context creation, NCCL and
    module loads, first launches) takes :data:`ONE_TIME_WARN_FRACTION` of a rank's profiled
    time or more. A rank late for that reason is not a straggler of the steady state."""
    cold = [r for r in ctx.rows if r.one_time_share >= ONE_TIME_WARN_FRACTION]
    evidence = (
        *(
            Evidence(f"one_time_share_rank_{r.rank}", round(100 * r.one_time_share, 1), "%")
            for r in ctx.rows
        ),
        Evidence("threshold", round(100 * ONE_TIME_WARN_FRACTION, 1), "%"),
    )
    if not cold:
        return [
            Finding(
                id="cold-ranks",
                status=Status.OK,
                title="No rank's trace is dominated by one-time start-up",
                evidence=evidence,
                group=GROUP,
            )
        ]
    worst = max(cold, key=lambda r: r.one_time_share)
    return [
        Finding(
            id="cold-ranks",
            status=Status.WARN,
            title=f"{len(cold)} of {len(ctx.rows)} ranks' traces are first passes: one-time "
            f"start-up takes {round(100 * worst.one_time_share, 1)} % of rank {worst.rank}'s "
            f"profiled time (the largest call: {worst.one_time_call or 'n/a'}); waits at the "
            "collectives then measure who started up last, not the steady state",
            evidence=evidence,
            fix="profile after warm-up on every rank: torch.profiler.schedule(wait=1, "
            "warmup=1, active=3) (the first collectives also set up NCCL's connections)",
            group=GROUP,
            details=tuple(
                f"rank {r.rank}: one-time start-up {r.one_time_us / 1e3:,.1f} ms "
                f"({round(100 * r.one_time_share, 1)} %), largest {r.one_time_call or 'n/a'}"
                for r in cold
            ),
        )
    ]


def cold_ranks_apart(findings: list[Finding], rows: list[RankRow]) -> list[Finding]:
    """With a rank's trace a first pass (:data:`ONE_TIME_WARN_FRACTION` of it one-time start-up,
    as cold-ranks warns), the straggler and exposed-communication warnings become information:
    every collective after a rank's start-up waits for it, and the first collectives set up
    NCCL's connections, so they judge the start-up, not the job's steady state."""
    if not any(r.one_time_share >= ONE_TIME_WARN_FRACTION for r in rows):
        return findings
    note = (
        "a rank's trace is a first pass (see cold-ranks): this judges its start-up; "
        "profile after warm-up to judge the job"
    )
    return as_information(findings, note, lambda f: f.id in ("straggler", "exposed-communication"))


RULES_RANKS: tuple[Rule, ...] = (straggler, exposed_communication, cold_ranks)


def _gain(wait_per_step: float, extra_work: float | None, step_med: float) -> float | None:
    """The share of the step the others would get back if the straggler kept up."""
    if step_med <= 0:
        return None
    if extra_work is not None:
        return min(wait_per_step, max(extra_work, 0.0), step_med) / step_med
    return wait_per_step / step_med
