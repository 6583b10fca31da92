"""The steps of the command's PyTorch processes (the flight recorder,
:mod:`gpuprobe.tools.monitor.steps`): how fast they went, the slow ones, a drift."""

from __future__ import annotations

import shlex

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.monitor.rules._common import GROUP
from gpuprobe.tools.monitor.steps import StepStats
from gpuprobe.tools.monitor.summary import RunContext

__all__ = [
    "SLOW_SHARE_WARN",
    "STEP_DRIFT_WARN",
    "captures",
    "slow_steps",
    "step_drift",
    "step_summary",
]

SLOW_SHARE_WARN = 0.05  # of the steps' time lost in slow steps: past it, a warning
STEP_DRIFT_WARN = 1.2  # × : the last quarter's median step this much longer than the first's
PROFILE_BEFORE = 2  # steps before a recurring slow step that a suggested window starts


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def _unit(st: StepStats) -> str:
    return {"optimizer": "optimizer steps", "dataloader": "DataLoader batches"}.get(
        st.mode or "", "steps"
    )


@rule("monitor-steps")
def step_summary(ctx: RunContext) -> list[Finding]:
    """``monitor-steps`` (info): each process's steps: how many, the median and p95 step, the
    rate, and the energy a step where the GPUs' energy was read."""
    out = []
    for st in ctx.steps:
        if st.median_s is None:
            continue
        energy = ""
        if st.joules_per_step is not None:
            energy = f"; {st.joules_per_step:.4g} J a step"
        out.append(
            Finding(
                id="monitor-steps",
                status=Status.INFO,
                title=f"{st.name}: {st.steps} {_unit(st)}, median {_ms(st.median_s)}, p95 "
                f"{_ms(st.p95_s)}, {st.per_second:.3g} a second{energy}",
                evidence=(
                    Evidence("steps", st.steps, ""),
                    Evidence("step_median", st.median_s, "s"),
                    Evidence("step_p95", st.p95_s, "s"),
                    Evidence("steps_per_second", st.per_second, "/s"),
                )
                + (
                    (
                        Evidence("joules_per_step", st.joules_per_step, "J"),
                        Evidence("energy_method", st.energy_method, ""),
                    )
                    if st.joules_per_step is not None
                    else ()
                ),
                group=GROUP,
                subject=f"pid {st.pid}",
            )
        )
    return out


def _profile_hint(ctx: RunContext, st: StepStats) -> str:
    """A ``gpuprobe profile`` line whose window holds the next slow step, when they recur."""
    if st.every is None or st.first_slow is None:
        return "profile around one: gpuprobe profile --later, then profile --now when it comes"
    skip = max(0, st.first_slow - PROFILE_BEFORE - 1)  # the window's warm-up step is skip's
    command = shlex.join(ctx.timeline.header.command or ["CMD"])
    return (
        f"profile one: gpuprobe profile --skip {skip} --warmup 1 --active "
        f"{PROFILE_BEFORE + 2} -- {command}"
    )


@rule("monitor-slow-steps")
def slow_steps(ctx: RunContext) -> list[Finding]:
    """``monitor-slow-steps``: steps past k × the median (warning when they cost
    :data:`SLOW_SHARE_WARN` of the steps' time or more, info below), the longest named with
    when they ended; recurring ones (every N steps: a checkpoint, an evaluation, a sync for
    logging) said so, with a profile window that holds the next one."""
    out = []
    for st in ctx.steps:
        if not st.slow_count or st.median_s is None or st.slow_share is None:
            continue
        warn = st.slow_share >= SLOW_SHARE_WARN
        every = f", every {st.every} steps from step {st.first_slow}" if st.every else ""
        details = tuple(
            f"step {s.step}: {_ms(s.seconds)} ({s.times_median:.3g}× the median), ended at "
            f"{s.at_s:.1f} s"
            for s in st.slow
        )
        out.append(
            Finding(
                id="monitor-slow-steps",
                status=Status.WARN if warn else Status.INFO,
                title=f"{st.name}: {st.slow_count} slow step(s), {st.slow_k:.3g}× the median "
                f"{_ms(st.median_s)} or longer{every}: {_ms(st.slow_extra_s)} beyond the "
                f"median, {100 * st.slow_share:.2g} % of the steps' time",
                evidence=(
                    Evidence("slow_steps", st.slow_count, ""),
                    Evidence("slow_k", st.slow_k, "×"),
                    Evidence("step_median", st.median_s, "s"),
                    Evidence("slow_extra", st.slow_extra_s, "s"),
                    Evidence("slow_share", round(100 * st.slow_share, 2), "%"),
                )
                + ((Evidence("every", st.every, "steps"),) if st.every else ()),
                fix=_profile_hint(ctx, st)
                + "; a step that stalls on a schedule is often a checkpoint, an evaluation or a "
                "logging sync (.item(), print of a tensor) on the training thread",
                group=GROUP,
                subject=f"pid {st.pid}",
                details=details,
                gain=round(st.slow_share, 4) if warn else None,
            )
        )
    return out


@rule("monitor-step-drift")
def step_drift(ctx: RunContext) -> list[Finding]:
    """``monitor-step-drift`` (warning): the median step of the last quarter of the steady steps
    :data:`STEP_DRIFT_WARN` × the first quarter's or more: the job slowed as it ran."""
    out = []
    for st in ctx.steps:
        if st.drift is None or st.drift < STEP_DRIFT_WARN:
            continue
        out.append(
            Finding(
                id="monitor-step-drift",
                status=Status.WARN,
                title=f"{st.name}: its steps slowed from {_ms(st.drift_from_s)} to "
                f"{_ms(st.drift_to_s)} over the run ({st.drift:.3g}×)",
                evidence=(
                    Evidence("drift", st.drift, "×"),
                    Evidence("step_median_first_quarter", st.drift_from_s, "s"),
                    Evidence("step_median_last_quarter", st.drift_to_s, "s"),
                ),
                fix="look at what grows with it in this report (the command's RSS, GPU memory, "
                "the clocks and temperature), and profile late in the run: gpuprobe profile "
                "--later, then gpuprobe profile --now",
                group=GROUP,
                subject=f"pid {st.pid}",
            )
        )
    return out


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


@rule("monitor-captures")
def captures(ctx: RunContext) -> list[Finding]:
    """``monitor-captures``: each window the flight recorder opened by itself (``run
    --capture-on slow``): the slow step that set it off, the steps it recorded and the verdict
    that leads its trace's diagnosis (a warning when that verdict is one), or why it has none."""
    out = []
    for e in ctx.timeline.events:
        if e.get("kind") != "capture":
            continue
        step, seconds, median = _int(e.get("step")), _num(e.get("seconds")), _num(e.get("median_s"))
        if step is None or seconds is None or not median:
            continue
        first, last, every = _int(e.get("first")), _int(e.get("last")), _int(e.get("every"))
        low = _num(e.get("from_median_s"))
        if e.get("why") == "drift" and low:
            what = (
                f"the steps drifted to {median / low:.3g}× their lowest running median "
                f"({_ms(low)} → {_ms(median)}) by step {step}"
            )
        else:
            what = f"step {step} took {seconds / median:.3g}× the median ({_ms(median)})"
        if first is not None and last is not None and e.get("trace"):
            aimed = f", placed on the next slow one (every {every} steps)" if every else ""
            recorded = f"steps {first}..{last} profiled{aimed}"
            if e.get("held_slow") is False:
                recorded += ", none of them slow (the slow step came and went" + (
                    "; not counted against --capture-every)" if e.get("free") else ")"
                )
        else:
            recorded = f"no trace ({e.get('state') or 'not opened'})"
        verdict = e.get("verdict")
        title = e.get("verdict_title")
        tail = f": {verdict}: {title}" if verdict else (f": {title}" if title else "")
        warn = e.get("verdict_status") in ("warn", "fail")
        out.append(
            Finding(
                id="monitor-captures",
                status=Status.WARN if warn else Status.INFO,
                title=f"{e.get('name') or 'pid ?'}: {what}: {recorded}{tail}",
                evidence=(
                    Evidence("slow_step", step, ""),
                    Evidence("step_seconds", round(seconds, 6), "s"),
                    Evidence("step_median", round(median, 6), "s"),
                    Evidence("verdict", verdict if isinstance(verdict, str) else None, ""),
                ),
                fix=f"read it: gpuprobe diagnose {e.get('trace')} --html report.html"
                if e.get("trace")
                else "",
                group=GROUP,
                subject=f"pid {e.get('pid')}",
                details=(f"trace: {e.get('trace')}",) if e.get("trace") else (),
            )
        )
    return out
