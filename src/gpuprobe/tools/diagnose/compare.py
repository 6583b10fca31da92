"""Compare two diagnoses: the step time's change and what explains most of it, the headline
numbers side by side, the shares of GPU time that moved (Tensor Cores, precision, copy kinds,
kernel families), the kernels whose GPU time changed most, and each finding's status.

A duration that grows is *slower*, whatever else changed: a copy that runs 256 times as often at
a seventh of the time per call takes more of the step, and is reported so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from gpuprobe.core.findings import Status
from gpuprobe.tools.diagnose.model import (
    Diagnosis,
    FindingChange,
    FixPayoff,
    MetricChange,
    ShareChange,
    StepBreakdown,
    TraceComparison,
)

if TYPE_CHECKING:
    from gpuprobe.tools.diagnose.analysis import TraceContext
    from gpuprobe.tools.diagnose.kernel_diff_model import KernelDiff
    from gpuprobe.tools.diagnose.mix import Share

__all__ = [
    "FIXED_LEFT_SHARE",
    "HEADLINE_PARTS",
    "HEADLINE_PART_FRACTION",
    "METRIC_SAME_FRACTION",
    "METRIC_SAME_PP",
    "PAYOFF_MIN_GAIN",
    "PAYOFF_POINTS",
    "PAYOFF_SHARE",
    "SHARE_CHANGE_PP",
    "compare_diagnoses",
    "fix_payoffs",
]

SHARE_CHANGE_PP = 5.0  # percentage points; a share that moves this much is flagged; ours. In
# the corpus's 14 GPU traces of 3+ steps, a share's spread (max - min) between the steps of one
# trace has a median of 0.02-2.3 pp; compute families reach 5.6 pp, communication 16 pp (NCCL
# kernels include the wait for the other ranks), and two runs of one config (r50 a/b) move none
METRIC_SAME_FRACTION = 0.02  # relative change of a number below which it counts as unchanged;
# ours, about the run-to-run spread of a step's time
METRIC_SAME_PP = 0.5  # percentage points; the same for a number that is itself a percentage; ours
HEADLINE_PARTS = 2  # kinds of GPU time named in the headline as what explains the change; ours
HEADLINE_PART_FRACTION = 0.25  # and only those that moved at least this share of the first; ours

PAYOFF_POINTS = 0.05  # of the step: a fix paid what it promised when the realised gain is within
PAYOFF_SHARE = 0.25  # this many points of the prediction, or this share of it, whichever is
# larger: issue 39's goal for the what-if engine (about the run-to-run spread of a step, 2 %,
# plus the replay's error on the H200 pairs of benchmarks/whatif_pairs.py)
FIXED_LEFT_SHARE = 0.25  # a cause counts as fixed in AFTER when its finding there is gone (no
# warning, no priced information) or warns for at most this share of what it was worth in
# BEFORE (a cause mostly fixed); ours
PAYOFF_MIN_GAIN = 0.01  # of the step: a fix predicted to gain less is not followed; ours, half
# the run-to-run spread of a step's time (METRIC_SAME_FRACTION)

# What each cause of GPU idle time is, in the headline's words (keys of StepBreakdown's
# idle_cause_us; a cause not listed here is named by its key).
_IDLE_WORDS = {
    "input": "GPU idle waiting for the DataLoader",
    "sync": "GPU idle around host syncs",
    "host": "GPU idle at the step's edges (host work before the first kernel or after the last)",
    "launch": "GPU idle waiting for kernel launches",
    "short": "GPU idle in short gaps between queued kernels",
    "other": "GPU idle with no cause in the trace",
}


def _med(d: Diagnosis, get: Callable[[StepBreakdown], float | None]) -> float | None:
    vals = [v for v in (get(r) for r in d.steps) if v is not None]
    return float(np.median(vals)) if vals else None


def _pct(x: float | None) -> float | None:
    return None if x is None else 100.0 * x


def _share(d: Diagnosis, get: Callable[[StepBreakdown], float]) -> float | None:
    vals = [get(r) / r.duration_us for r in d.steps if r.duration_us > 0]
    return 100.0 * float(np.median(vals)) if vals else None


def _gpu(get: Callable[[StepBreakdown], float | None]) -> Callable[[StepBreakdown], float | None]:
    return lambda r: get(r) if r.device is not None else None


def _idle_of(cause: str) -> Callable[[StepBreakdown], float | None]:
    return lambda r: r.idle_cause_us.get(cause, 0.0)


# (name, unit, better, how to read it from a Diagnosis); every duration is better lower
_METRICS: tuple[tuple[str, str, str, Callable[[Diagnosis], float | None]], ...] = (
    ("step time (median)", "µs", "lower", lambda d: _med(d, lambda r: r.duration_us)),
    ("GPU busy per step", "µs", "lower", lambda d: _med(d, _gpu(lambda r: r.gpu_busy_us))),
    ("GPU idle per step", "µs", "lower", lambda d: _med(d, _gpu(lambda r: r.idle_us))),
    (
        "GPU busy (median step)",
        "%",
        "higher",
        lambda d: _pct(_med(d, lambda r: r.gpu_busy_fraction)),
    ),
    (
        "GPU busy (steps' span, HTA)",
        "%",
        "higher",
        lambda d: (
            None if d.summary.gpu_busy_fraction is None else 100.0 * d.summary.gpu_busy_fraction
        ),
    ),
    (
        "kernels per step",
        "",
        "lower",
        lambda d: _med(d, lambda r: r.kernels if r.device is not None else None),
    ),
    # no verdict: kernels grow when they are fused (fewer, longer), which is the point
    ("median kernel", "µs", "", lambda d: _med(d, lambda r: r.median_kernel_us)),
    ("DataLoader share of step", "%", "lower", lambda d: _share(d, lambda r: r.dataloader_us)),
    ("syncs per step", "", "lower", lambda d: _med(d, lambda r: float(r.syncs))),
    ("scalar reads per step", "", "lower", lambda d: _med(d, lambda r: float(r.items))),
    ("CPU ops per step", "", "lower", lambda d: _med(d, lambda r: float(r.cpu_ops))),
)


def _tolerance(unit: str, before: float | None, after: float | None) -> float:
    if unit == "%":
        return METRIC_SAME_PP
    vals = [abs(v) for v in (before, after) if v is not None]
    return METRIC_SAME_FRACTION * max(vals) if vals else 0.0


def _shares(before: list[Share], after: list[Share]) -> tuple[ShareChange, ...]:
    """Pair the shares of two traces by key; a part one trace lacks is 0 of its whole."""
    b = {s.key: s for s in before}
    a = {s.key: s for s in after}
    whole_b = {(s.group, s.of): s.whole_us for s in before}
    whole_a = {(s.group, s.of): s.whole_us for s in after}
    out = []
    for key in [*b, *(k for k in a if k not in b)]:
        sb, sa = b.get(key), a.get(key)
        s = sb or sa
        assert s is not None
        wb = whole_b.get((s.group, s.of), 0.0)
        wa = whole_a.get((s.group, s.of), 0.0)
        fb = (sb.part_us if sb else 0.0) / wb if wb > 0 else None
        fa = (sa.part_us if sa else 0.0) / wa if wa > 0 else None
        moved = fb is not None and fa is not None and 100 * abs(fa - fb) >= SHARE_CHANGE_PP
        out.append(
            ShareChange(
                group=s.group,
                name=s.name,
                of=s.of,
                before=fb,
                after=fa,
                before_us=sb.part_us if sb else 0.0,
                after_us=sa.part_us if sa else 0.0,
                better=s.better,
                flagged=moved,
            )
        )
    return tuple(out)


def _t(us: float) -> str:
    """A duration (its size; the sign is said in words): ``455 µs``, ``17.1 ms``, ``1.34 s``."""
    us = abs(us)
    if us < 1e3:
        return f"{us:,.{1 if us < 10 else 0}f} µs"
    return f"{us / 1e3:,.1f} ms" if us < 1e6 else f"{us / 1e6:,.2f} s"


def _n(x: float) -> str:
    """A count per step: whole, or with one decimal (a mean over steps)."""
    return f"{x:,.0f}" if x == int(x) else f"{x:,.1f}"


def _devices(d: Diagnosis) -> str:
    names: dict[str, int] = {}
    for g in d.summary.devices:
        cc = f" (compute {g.compute_major}.{g.compute_minor})" if g.compute_major else ""
        names[g.name + cc] = names.get(g.name + cc, 0) + 1
    return ", ".join(f"{n} × {k}" if n > 1 else k for k, n in names.items())


def _world_size(ctx: TraceContext | None) -> int | None:
    info = ctx.raw.header.get("distributedInfo") if ctx is not None else None
    size = info.get("world_size") if isinstance(info, dict) else None
    return size if isinstance(size, int) and not isinstance(size, bool) else None


def _notes(
    before: Diagnosis,
    after: Diagnosis,
    ctx_before: TraceContext | None = None,
    ctx_after: TraceContext | None = None,
) -> tuple[str, ...]:
    """What makes the two traces differ in kind: their GPUs, their world size, a GPU side."""
    out = []
    gb, ga = _devices(before), _devices(after)
    kinds_b = {g.name for g in before.summary.devices}
    kinds_a = {g.name for g in after.summary.devices}
    if kinds_b and kinds_a and kinds_b != kinds_a:
        out.append(
            f"the traces ran on different GPUs: {gb} → {ga}; kernel times, Tensor-Core use "
            "and precision compare the cards as much as the code"
        )
    if before.summary.has_gpu != after.summary.has_gpu:
        which = "before" if before.summary.has_gpu else "after"
        out.append(f"only the {which} trace has GPU activity")
    wb, wa = _world_size(ctx_before), _world_size(ctx_after)
    if wb is not None and wa is not None and wb != wa:
        out.append(f"the jobs had different world sizes: {wb} → {wa} ranks")
    return tuple(out)


def _gpu_part(kd: KernelDiff | None, shares: tuple[ShareChange, ...], sign: float) -> list[str]:
    """The kinds of GPU time (kernel families) that moved most in the step's direction, each
    with what inside it says why: the Tensor-Core share for GEMM/conv, else its largest kernel."""
    if kd is None:
        return []
    fams = sorted(
        (f for f in kd.families if (f.after_us - f.before_us) * sign > 0),
        key=lambda f: -abs(f.after_us - f.before_us),
    )[:HEADLINE_PARTS]
    if fams:
        first = abs(fams[0].after_us - fams[0].before_us)
        fams = [f for f in fams if abs(f.after_us - f.before_us) >= HEADLINE_PART_FRACTION * first]
    tc = next((s for s in shares if s.group == "Tensor Cores"), None)
    out = []
    for f in fams:
        delta = f.after_us - f.before_us
        why = ""
        if f.family in ("GEMM", "convolution") and tc is not None and tc.flagged:
            why = (
                f"Tensor Cores {100 * (tc.before or 0):.1f} % → {100 * (tc.after or 0):.1f} % "
                "of GEMM/conv time"
            )
        else:
            k = next(
                (c for c in kd.changes if c.family == f.family and c.delta_us * sign > 0), None
            )
            if k is not None:
                why = (
                    f"{k.name}: {_t(k.total_before_us)} → {_t(k.total_after_us)}, "
                    f"{_n(k.count_before)} → {_n(k.count_after)} per step"
                )
        out.append(
            f"{f.family} {'+' if delta > 0 else '−'}{_t(delta)}" + (f" ({why})" if why else "")
        )
    return out


def _headline(
    before: Diagnosis, after: Diagnosis, kd: KernelDiff | None, shares: tuple[ShareChange, ...]
) -> str:
    """The step time's change and the part of the step that explains most of it."""
    sb = _med(before, lambda r: r.duration_us)
    sa = _med(after, lambda r: r.duration_us)
    if sb is None or sa is None:
        return ""
    delta = sa - sb
    head = f"Step time {_t(sb)} → {_t(sa)} (median)"
    if abs(delta) <= METRIC_SAME_FRACTION * max(sb, sa):
        return head + ": about the same."
    word = "slower" if delta > 0 else "faster"
    head += f": {_t(delta)} ({100 * abs(delta) / sb:,.0f} %) {word}."
    sign = 1.0 if delta > 0 else -1.0
    # the parts of the step: GPU busy, each cause of GPU idle (or, without a GPU, the DataLoader)
    parts: dict[str, tuple[float, float]] = {}
    gpu = before.summary.has_gpu and after.summary.has_gpu
    if gpu:
        busy = [_med(d, _gpu(lambda r: r.gpu_busy_us)) for d in (before, after)]
        if busy[0] is not None and busy[1] is not None:
            parts["busy"] = (busy[0], busy[1])
        causes = {c for d in (before, after) for r in d.steps for c in r.idle_cause_us}
        for c in sorted(causes):
            vals = [_med(d, _gpu(_idle_of(c))) for d in (before, after)]
            if vals[0] is not None and vals[1] is not None:
                parts[c] = (vals[0], vals[1])
    else:
        parts["DataLoader"] = (
            _med(before, lambda r: r.dataloader_us) or 0.0,
            _med(after, lambda r: r.dataloader_us) or 0.0,
        )
    if not parts:
        return head
    key, (pb, pa) = max(parts.items(), key=lambda kv: sign * (kv[1][1] - kv[1][0]))
    if sign * (pa - pb) <= 0:
        return head
    # "most of it" only when this part moved by at least half as much as the step
    lead = "Most of it" if abs(pa - pb) >= 0.5 * abs(delta) else "The largest part"
    if key == "busy":
        more = "more" if pa > pb else "less"
        text = f"{head} {lead}: the GPU is busy {_t(pa - pb)} {more} per step ({_t(pb)} → {_t(pa)})"
        kinds = _gpu_part(kd, shares, sign)
        if kinds:
            text += "; GPU time per step, all streams: " + ", ".join(kinds)
        return text + "."
    what = _IDLE_WORDS.get(key, f"GPU idle ({key})") if gpu else "DataLoader time"
    return f"{head} {lead}: {what}, {_t(pb)} → {_t(pa)} per step."


def _gains(d: Diagnosis) -> dict[str, tuple[float, str]]:
    """Each problem's predicted gain (its finding's, the what-if replay's where it priced one)
    and title; the GPU-idle summary is left out: it is its causes' sum, not a fix."""
    out: dict[str, tuple[float, str]] = {}
    for f in d.findings:
        if f.id == "gpu-idle" or f.gain is None or f.status not in (Status.WARN, Status.FAIL):
            continue
        if f.id not in out or f.gain > out[f.id][0]:
            out[f.id] = (f.gain, f.title)
    return out


def _left(d: Diagnosis, id: str) -> tuple[float, bool]:
    """(What finding ``id``'s fix is still worth in ``d``, 0 when it does not warn there;
    whether its cause is still there: a warning, or information with a price, a cause the
    replay still finds but off the step's path)."""
    mine = [f for f in d.findings if f.id == id]
    warn = [f.gain or 0.0 for f in mine if f.status in (Status.WARN, Status.FAIL)]
    priced = any(f.status is Status.INFO and f.gain is not None for f in mine)
    return max(warn, default=0.0), bool(warn) or priced


def fix_payoffs(
    before: Diagnosis, after: Diagnosis, ctx_before: TraceContext | None = None
) -> tuple[float | None, tuple[FixPayoff, ...]]:
    """The step's realised gain (1 − median step after / median step before; None without
    steps in both) and, for each fix BEFORE predicted at least :data:`PAYOFF_MIN_GAIN` for,
    the gain it promised against the one realised, largest prediction first.

    One realised gain is shared by every fix made between the traces: a fix counts as made when
    its cause is gone from AFTER (:data:`FIXED_LEFT_SHARE`); the fixes made are judged together
    against their prediction together: with BEFORE's trace context, the replay of all their
    changes at once (:func:`~.rules.gains.price_together`); without it, or for a fix the replay
    does not price, the sum of their gains, at most 1 (causes on one step's path, apart)."""
    sb = _med(before, lambda r: r.duration_us)
    sa = _med(after, lambda r: r.duration_us)
    realised = 1.0 - sa / sb if sb and sa is not None and sb > 0 else None
    gains = _gains(before)
    made = {}
    for id, (g, _) in gains.items():
        if g < PAYOFF_MIN_GAIN:
            continue
        left, there = _left(after, id)
        made[id] = (left, left <= FIXED_LEFT_SHARE * g and not (there and left == 0.0))
    together = tuple(id for id, (_, fixed) in made.items() if fixed)
    joint = None
    if len(together) > 1 and ctx_before is not None:
        from gpuprobe.tools.diagnose.rules.gains import price_together

        joint = price_together(ctx_before, together)
    if joint is None and together:
        joint = min(sum(gains[id][0] for id in together), 1.0)
    out = []
    for id, (left, fixed) in made.items():
        g, title = gains[id]
        verdict = "not fixed"
        if fixed and realised is not None and joint is not None:
            tol = max(PAYOFF_POINTS, PAYOFF_SHARE * joint)
            verdict = (
                "paid as predicted"
                if abs(realised - joint) <= tol
                else "paid less"
                if realised < joint
                else "paid more"
            )
        out.append(
            FixPayoff(
                id=id,
                title=title,
                predicted=round(g, 6),
                left=round(left, 6),
                fixed=fixed,
                realised=None if realised is None else round(realised, 6),
                together=together if fixed else (),
                predicted_together=round(joint, 6) if fixed and joint is not None else None,
                verdict=verdict,
            )
        )
    out.sort(key=lambda p: -p.predicted)
    return (None if realised is None else round(realised, 6)), tuple(out)


def compare_diagnoses(
    before: Diagnosis,
    after: Diagnosis,
    ctx_before: TraceContext | None = None,
    ctx_after: TraceContext | None = None,
) -> TraceComparison:
    """Build the :class:`TraceComparison` of ``before`` and ``after``; with both traces'
    contexts, also the shares of GPU time and the kernel diff."""
    metrics = []
    for name, unit, better, get in _METRICS:
        vb, va = get(before), get(after)
        metrics.append(
            MetricChange(
                name=name,
                unit=unit,
                before=vb,
                after=va,
                better=better,
                tolerance=_tolerance(unit, vb, va),
            )
        )
    ids: list[tuple[str, str]] = []
    for f in (*before.findings, *after.findings):
        key = (f.id, f.subject)
        if key not in ids:
            ids.append(key)

    def status(d: Diagnosis, key: tuple[str, str]) -> tuple[Status | None, str]:
        f = next((f for f in d.findings if (f.id, f.subject) == key), None)
        return (None, "") if f is None else (f.status, f.title)

    changes = []
    for key in ids:
        sb, tb = status(before, key)
        sa, ta = status(after, key)
        label = key[0] + (f" ({key[1]})" if key[1] else "")
        changes.append(FindingChange(id=label, title=ta or tb, before=sb, after=sa))
    changes.sort(
        key=lambda c: -max(c.before.rank if c.before else 0, c.after.rank if c.after else 0)
    )
    shares: tuple[ShareChange, ...] = ()
    kd = None
    if ctx_before is not None and ctx_after is not None:
        from gpuprobe.tools.diagnose.kernel_diff import compare_kernels
        from gpuprobe.tools.diagnose.mix import time_mix

        shares = _shares(time_mix(ctx_before), time_mix(ctx_after))
        if before.summary.has_gpu or after.summary.has_gpu:
            kd = compare_kernels(ctx_before, ctx_after)
    realised, payoffs = fix_payoffs(before, after, ctx_before)
    return TraceComparison(
        before=before,
        after=after,
        metrics=tuple(metrics),
        findings=tuple(changes),
        payoffs=payoffs,
        realised=realised,
        shares=shares,
        kernels=kd,
        headline=_headline(before, after, kd, shares),
        notes=_notes(before, after, ctx_before, ctx_after),
        share_change_pp=SHARE_CHANGE_PP,
    )
