"""The profiled window: whether its steps are steady. A step that takes more than
:data:`~gpuprobe.tools.diagnose.steadiness.UNSTEADY_STEP_FACTOR` times the steady median step
(:mod:`gpuprobe.tools.diagnose.steadiness`) is named, with what it likely is: at the window's
start, warm-up that is not over (those steps are left out of the analysis, as one-time-start's
warm-up steps are); in it, the DataLoader, other work (an evaluation, a checkpoint, logging: more
ops), host code between the ops that the profiler does not record (a checkpoint save, I/O, a
sleep: a hole in the training thread's events) or the same work slower (a busy machine). Each
step's time is its time less its one-time start-up, which is one-time-start's (:mod:`.startup`), and less the compiling and the far slower compiled
runs in it, which are compiled-regions' (:mod:`.compiled`): no two findings count the same time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.rules._common import GROUP, median, pct
from gpuprobe.tools.diagnose.rules.compiled import one_off_us
from gpuprobe.tools.diagnose.steadiness import (
    UNSTEADY_MIN_EXCESS_US,
    UNSTEADY_MIN_STEPS,
    UNSTEADY_STEP_FACTOR,
    StepFacts,
    one_time_call_us,
    slow_steps,
    step_facts,
)

__all__ = ["UNSTEADY_DATA_SHARE", "UNSTEADY_WARN_SHARE", "unsteady_window"]

UNSTEADY_WARN_SHARE = 0.01  # of the profiled steps' time the slow steps must take above the
# steady median for a warning (below it, information): the 1 % under which a warning's gain is
# not worth the user's time first (rules.MIN_WARN_GAIN); ours
UNSTEADY_DATA_SHARE = 0.5  # of a slow step's time above the steady median spent in the
# DataLoader (above its steady median) past which the DataLoader is the likely cause; ours

_FIX = {
    "warm-up": "profile after warm-up: torch.profiler.profile(schedule=torch.profiler."
    "schedule(wait=1, warmup=2, active=3), ...) and prof.step() each iteration (a larger "
    "warmup= if the first active steps are still slow)",
    "data": "feed the steps: more DataLoader workers (num_workers=), persistent_workers=True "
    "so that they outlive each epoch, a larger prefetch_factor; or cheaper batches",
    "other work": "keep evaluation, checkpoints and logging out of the profiled steps "
    "(schedule's wait=), or profile more steps (active=10) so that the median is a training step",
    "untraced": "see the Python in that gap: profile with its stacks (gpuprobe profile "
    "--with-stack, or torch.profiler.profile(with_stack=True)); a checkpoint or logging on the "
    "training thread is the usual one: save asynchronously (torch.distributed.checkpoint."
    "async_save, or a thread writing a CPU copy of the state), or less often",
    "slower": "profile again on an idle machine (nvidia-smi and top show what else runs) and "
    "over more steps (schedule(active=10)) to see whether the slow step recurs; --html-step N "
    "shows its timeline",
}


def _ms(us: float) -> str:
    return f"{us / 1e3:,.1f} ms"


def _label(fs: Sequence[StepFacts]) -> str:
    return ", ".join(f"#{f.number}" for f in fs)


_LIKELY = {
    "warm-up": "warm-up not over: the steady steps' work, slower, at the window's start (caches, "
    "autotuning, the allocator and Python's first calls still settling)",
    "data": "the DataLoader: its workers do not keep up, or start an epoch",
    "other work": "other work than the steady steps': an evaluation, a checkpoint, logging, an "
    "accumulated optimizer step",
    "untraced": "host code the profiler does not record, on the training thread between its "
    "ops: a checkpoint save, file or network I/O, logging, a sleep or a lock (Python is not "
    "recorded without with_stack)",
    "slower": "the steady steps' work, slower, inside the window: a busy machine (other "
    "processes on its CPUs or GPU), a pause of the process (garbage collection, swapping), or "
    "the GPU's clocks dropping",
}


_SHORT = {
    "warm-up": "warm-up not over",
    "data": "the DataLoader",
    "other work": "other work (an evaluation, a checkpoint, logging)",
    "untraced": "host code between the ops (a checkpoint, I/O, logging, a sleep)",
    "slower": "the same work slower (a busy machine, a pause)",
}


def _kind(f: StepFacts, excess: float, lead: bool, steady: Sequence[StepFacts]) -> tuple[str, str]:
    """(the likely kind of a slow step, what in it says so), against the steady steps' medians:
    the DataLoader's time, more work (CPU ops, kernel launches), its place in the window."""
    dl = median([s.dataloader_us for s in steady])
    ops = median([s.ops for s in steady])
    launches = median([s.launches for s in steady])
    if f.dataloader_us - dl >= UNSTEADY_DATA_SHARE * excess:
        return (
            "data",
            f"the DataLoader took {_ms(f.dataloader_us)} of it ({_ms(dl)} in a steady step)",
        )
    more_ops = f.ops > UNSTEADY_STEP_FACTOR * max(ops, 1)
    if more_ops or f.launches > UNSTEADY_STEP_FACTOR * max(launches, 1):
        return "other work", (
            f"other work, {f.ops:,} CPU ops and {f.launches:,} kernel launches ({ops:,.0f} and "
            f"{launches:,.0f} in a steady step)"
        )
    gap = median([s.untraced_us for s in steady])
    if not lead and f.untraced_us - gap >= UNSTEADY_DATA_SHARE * excess:
        return "untraced", (
            f"{_ms(f.untraced_us)} of it ran no traced op, runtime call or Python frame on the "
            f"training thread ({_ms(gap)} in a steady step): host code between the ops (a "
            "checkpoint, I/O, logging, a sleep)"
        )
    if lead:
        return "warm-up", _SHORT["warm-up"]
    return "slower", _SHORT["slower"]


@rule("unsteady-window")
def unsteady_window(ctx: TraceContext) -> list[Finding]:
    """The profiled steps' times (each less its one-time start-up) against their steady
    median: the slow steps named, with what they likely are and their time above the median."""
    lead = list(ctx.unsteady_lead)
    # one-off time other findings report is theirs: one-time start-up (one-time-start), the
    # compiling and a far slower run of a compiled region (compiled-regions)
    startup = (
        ctx.idle_of_cause("startup") if ctx.has_gpu else one_time_call_us(ctx, ctx.one_time_calls)
    )
    facts = step_facts(ctx, startup + one_off_us(ctx))
    if not facts or all(f.number is None for f in facts):
        return [
            Finding(
                id="unsteady-window",
                status=Status.SKIPPED,
                title="Step times: skipped: no ProfilerStep in the trace (one window); call "
                "prof.step() each iteration to judge whether the steps are steady",
                group=GROUP,
            )
        ]
    n = len(lead) + len(facts)
    if n < UNSTEADY_MIN_STEPS:
        return [
            Finding(
                id="unsteady-window",
                status=Status.SKIPPED,
                title=f"Step times: skipped: {n} profiled {'step' if n == 1 else 'steps'}; "
                f"whether they are steady takes {UNSTEADY_MIN_STEPS} or more "
                "(torch.profiler.schedule(active=3))",
                evidence=(Evidence("steps", n), Evidence("threshold_steps", UNSTEADY_MIN_STEPS)),
                group=GROUP,
            )
        ]
    times = np.array([f.us for f in facts])
    slow, ref = slow_steps(times)
    steady = [f for f, s in zip(facts, slow, strict=True) if not s]
    first_steady = int(np.argmin(slow))  # the analysed steps before it open the window slow
    named = [(f, True) for f in lead] + [
        (f, i < first_steady) for i, f in enumerate(facts) if slow[i]
    ]
    judged = _label([facts[0]]) + (f"..#{facts[-1].number}" if len(facts) > 1 else "")
    evidence = [
        Evidence("steps", n),
        Evidence("steady_median_step", round(ref / 1e3, 3), "ms"),
        Evidence("slow_steps", len(named)),
    ]
    thresholds = [
        Evidence("threshold_factor", UNSTEADY_STEP_FACTOR, "×"),
        Evidence("threshold_excess", UNSTEADY_MIN_EXCESS_US, "µs"),
    ]
    if not named:
        i = int(np.argmax(times))
        return [
            Finding(
                id="unsteady-window",
                status=Status.OK,
                title=f"Steady steps: the slowest, #{facts[i].number}, took {_ms(times[i])}, "
                f"{times[i] / max(ref, 1e-9):.1f}× the median of {_ms(ref)} (steps {judged})",
                evidence=(
                    *evidence,
                    Evidence("slowest_step", round(times[i] / 1e3, 3), "ms"),
                    Evidence("slowest_ratio", round(times[i] / max(ref, 1e-9), 2), "×"),
                    *thresholds,
                ),
                group=GROUP,
            )
        ]
    excess = {f.number: f.us - ref for f, _ in named}
    kinds = {f.number: _kind(f, excess[f.number], at_start, steady) for f, at_start in named}
    above = float(sum(excess.values()))
    profiled = float(times.sum()) + ctx.unsteady_lead_us
    share = above / profiled if profiled > 0 else 0.0
    worst = max((f for f, _ in named), key=lambda f: f.us)
    evidence += [
        Evidence("slowest_step", round(worst.us / 1e3, 3), "ms"),
        Evidence("slowest_ratio", round(worst.us / max(ref, 1e-9), 2), "×"),
        Evidence("slow_time_above_median", round(above / 1e3, 3), "ms"),
        Evidence("share_of_profiled_time", pct(share), "%"),
        Evidence("left_out_steps", len(lead)),
        *thresholds,
    ]
    fs = [f for f, _ in named]
    times_text = ", ".join(f"{f.us / 1e3:,.1f}" for f in fs)
    ratios = sorted(f.us / max(ref, 1e-9) for f in fs)
    ratio_text = f"{ratios[0]:.1f}×" if len(ratios) == 1 else f"{ratios[0]:.1f}-{ratios[-1]:.1f}×"
    by_kind: dict[str, list[StepFacts]] = {}
    for f in fs:
        by_kind.setdefault(kinds[f.number][0], []).append(f)
    if len(fs) == 1:
        what = kinds[fs[0].number][1]
    elif len(by_kind) == 1:
        what = _SHORT[next(iter(by_kind))]
    else:
        what = "; ".join(f"{_SHORT[k]} ({_label(v)})" for k, v in by_kind.items())
    title = (
        f"Unsteady window: {'step' if len(fs) == 1 else 'steps'} {_label(fs)} took "
        f"{times_text} ms, {ratio_text} the steady median step ({_ms(ref)}): {what}"
    )
    if lead:
        title += f"; {_label(lead)} left out, the other findings judge steps {judged}"
    details = [f"{_label(v)}: {_LIKELY[k]}" for k, v in by_kind.items()]
    details += [
        f"#{f.number}: {_ms(f.us)}, {f.us / max(ref, 1e-9):.1f}× the steady median: "
        f"{kinds[f.number][1]}" + (" (left out)" if any(f is g for g in lead) else "")
        for f in fs
    ]
    details.append(
        f"steady median: {_ms(ref)}, the median of steps {_label(steady)} (the slow ones "
        "taken out); a step's time is less its one-time start-up (one-time-start's) and "
        "its compiling (compiled-regions')"
    )
    details.append(
        f"gain: the slow steps' time above the steady median, {_ms(above)} of the "
        f"{_ms(profiled)} profiled (the steps left out included)"
    )
    return [
        Finding(
            id="unsteady-window",
            status=Status.WARN if share >= UNSTEADY_WARN_SHARE else Status.INFO,
            title=title,
            evidence=tuple(evidence),
            fix="; ".join(_FIX[k] for k in by_kind),
            group=GROUP,
            details=tuple(details),
            gain=share,
        )
    ]
