"""Host work: what the CPU does while the GPU idles with nothing queued. The CPU ops that run
then are named, with their share of the step and the fix that fits them (inputs made on the
CPU, copies, an optimizer on the CPU); idle time under which no host event is recorded at all
is untraced host time, shown with what sits at its edges."""

from __future__ import annotations

import numpy as np

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.idle import UNTRACED_MIN_GAP_US, launching_ops
from gpuprobe.tools.diagnose.intervals import overlaps
from gpuprobe.tools.diagnose.rules._common import (
    GROUP,
    capture_skip,
    cause_share,
    no_activity,
    no_gpu,
    no_gpu_text,
    pct,
    per_step,
    steady_us,
)
from gpuprobe.tools.diagnose.rules.compiled import remedy
from gpuprobe.tools.diagnose.rules.gpu_time import GPU_BUSY_WARN_FRACTION

__all__ = [
    "HOST_IDLE_WARN_BUSY_FRACTION",
    "HOST_IDLE_WARN_FRACTION",
    "host_work",
    "untraced_host",
]

HOST_IDLE_WARN_FRACTION = 0.1  # of the steady step time (median over steps) the GPU idles for
# one cause to report it, and to warn while the GPU is busy less than half the step; the same
# bar as late launches (gpu_time.LAUNCH_IDLE_WARN_FRACTION); ours
HOST_IDLE_WARN_BUSY_FRACTION = 0.25  # of the steady step time: a share this large warns however
# busy the GPU is otherwise (a quarter of every step to gain); ours
_NAMED = 3  # ops named in the title
_WHOLE_WINDOW = 0.9  # of the analysed time: a Python frame this long is the script's main; ours
_OPS_NAME_IT = 0.5  # share of the host idle time the named ops must cover to name them; below,
# the Python frame that covers most of it is named instead; ours


def _device(ctx: TraceContext, cause: str) -> int:
    """The device whose idle time in ``cause`` is largest."""

    def length(d: int) -> float:
        s, e = ctx.idle_by_cause[d][cause]
        return float((e - s).sum())

    return max(ctx.devices, key=length)


def _median(values: list[float]) -> float:
    return float(np.median(values)) if values else 0.0


def _totals(
    ctx: TraceContext, cause: str
) -> tuple[float, float, float, tuple[np.ndarray, np.ndarray]]:
    """(idle µs in ``cause`` on its device, the median over steps of that idle's share of the
    steady step, the steady busy median, that idle time's intervals)."""
    d = _device(ctx, cause)
    rows = [r for r in ctx.breakdowns if r.device == d]
    idle = sum(r.idle_cause_us.get(cause, 0.0) for r in rows)
    busy = [(r.gpu_busy_us or 0.0) / max(steady_us(r), 1e-9) for r in rows]
    return idle, cause_share(rows, cause), _median(busy), ctx.idle_by_cause[d][cause]


def _status(share: float, busy: float) -> Status:
    if share < HOST_IDLE_WARN_FRACTION:
        return Status.OK
    if share >= HOST_IDLE_WARN_BUSY_FRACTION or busy < GPU_BUSY_WARN_FRACTION:
        return Status.WARN
    return Status.INFO


def _python_frame(ctx: TraceContext, s: np.ndarray, e: np.ndarray) -> tuple[str, float]:
    """The innermost Python frame (``python_function``, with_stack) under at least half of the
    intervals (s, e): (its name, µs covered); ("", 0) when none, or when the only such frame
    spans most of the analysed window (the script's main says nothing)."""
    if ctx.py_ts.size == 0 or s.size == 0:
        return "", 0.0
    ov = overlaps(s, e, ctx.py_ts, ctx.py_ts + ctx.py_dur)
    good = np.nonzero(ov >= 0.5 * float((e - s).sum()))[0]
    if good.size == 0:
        return "", 0.0
    i = int(good[np.argmin(ctx.py_dur[good])])
    if ctx.py_dur[i] >= _WHOLE_WINDOW * float(ctx.step_durations.sum()):
        return "", 0.0
    return ctx.names[int(ctx.py_name[i])], float(ov[i])


def _overhead_fix(ctx: TraceContext) -> str:
    """The fix for ops that spend long on the host before they queue their kernels, fitted to
    the run (eager, compiled, on CUDA graphs: :func:`.compiled.remedy`)."""
    return (
        "the host is slower than the GPU: these ops spend their time on the CPU before they "
        f"queue their kernels. {remedy(ctx, 'overhead')}; check the CPU is not oversubscribed "
        "(torch.get_num_threads(), other processes)"
    )


def _shown(name: str) -> str:
    """An op's name as shown: autograd's wrapper of a backward function named by the function
    (``autograd::engine::evaluate_function: AddmmBackward0`` -> ``AddmmBackward0``)."""
    for prefix in ("autograd::engine::evaluate_function: ", "torch::autograd::"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return name.replace("torch::autograd::", "")


def _fix_for(name: str) -> str:
    """The fix that fits the CPU op that fills the GPU's idle time."""
    if P.HOST_INPUT_OP.matches(name):
        return (
            f"{name} makes tensors on the CPU while the GPU waits: create them on the GPU "
            "(torch.randn(..., device='cuda')) or make the batches in DataLoader workers "
            "(num_workers>0, pin_memory=True) and copy with .to('cuda', non_blocking=True)"
        )
    if P.TRANSFER_OP.matches(name):
        return (
            f"{name} copies on the host's path while the GPU waits: pin the source "
            "(DataLoader(pin_memory=True)) and copy with non_blocking=True a step ahead, or keep "
            "the data on the GPU"
        )
    if "optim" in name.lower() or name.endswith(".step"):
        return (
            "the optimizer runs on the CPU's path: keep parameters and state on the GPU and use "
            "a fused or foreach optimizer (torch.optim.AdamW(..., fused=True))"
        )
    return (
        f"take {name} off the step's path: run it on the GPU, in DataLoader workers or every N "
        "steps; torch.profiler.record_function('name') around suspects shows which part it is"
    )


@rule("host-work")
def host_work(ctx: TraceContext) -> list[Finding]:
    """The CPU ops that run while the GPU idles with nothing queued (at the step's edges or in
    gaps of 1 ms or more between kernels), by the time they overlap that idle time."""
    if not ctx.has_gpu:
        return _host_only(ctx)
    what = "Host work while the GPU idles"
    skip = no_activity(ctx, "host-work", what) or capture_skip(ctx, "host-work", what)
    if skip:
        return skip
    idle, share, busy, (s, e) = _totals(ctx, "host")
    top = np.nonzero(ctx.op_top & (ctx.op_step >= 0))[0]
    by_name: dict[str, float] = {}
    gpu_op_us = 0.0  # of that, in ops that went on to queue GPU work (their host overhead)
    if s.size and top.size:
        a, b = ctx.op_ts[top], ctx.op_ts[top] + ctx.op_dur[top]
        ov = overlaps(s, e, a, b)
        launching = launching_ops(ctx, top)
        gpu_op_us = float(ov[launching].sum())
        for i, v in zip(top[ov > 0], ov[ov > 0], strict=True):
            name = _shown(ctx.names[int(ctx.op_name[i])])
            by_name[name] = by_name.get(name, 0.0) + float(v)
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1])
    named = sum(v for _, v in ranked)
    evidence = [
        Evidence("gpu_idle_in_host_work", round(idle, 1), "µs"),
        Evidence("share_of_step_median", pct(share), "%"),
        Evidence("gpu_busy_steady_median", pct(busy), "%"),
        Evidence("under_named_ops", pct(min(named / idle, 1.0)) if idle > 0 else None, "%"),
        Evidence("under_ops_that_launch", pct(min(gpu_op_us / idle, 1.0)) if idle else None, "%"),
        Evidence("threshold", pct(HOST_IDLE_WARN_FRACTION), "%"),
    ]
    details = tuple(
        f"{name}: {v / 1e3:,.2f} ms ({pct(v / idle) if idle else 0} % of that idle time)"
        for name, v in ranked[:8]
    )
    status = _status(share, busy)
    if status is Status.OK:
        return [
            Finding(
                id="host-work",
                status=Status.OK,
                title=f"The GPU idles {pct(share)} % of the step while the CPU works on "
                "something else",
                evidence=tuple(evidence),
                group=GROUP,
                details=details,
            )
        ]
    frame, in_frame = _python_frame(ctx, s, e)
    if frame:
        evidence.insert(4, Evidence("under_python_frame", pct(min(in_frame / idle, 1.0)), "%"))
    if ranked and named >= _OPS_NAME_IT * idle:
        ops = ", ".join(f"{n} ({pct(v / idle)} %)" for n, v in ranked[:_NAMED])
        title = (
            f"The GPU idles {pct(share)} % of the step with nothing queued while the CPU runs {ops}"
        )
        lead = ranked[0][0]
        overhead = gpu_op_us >= 0.5 * named and not P.TRANSFER_OP.matches(lead)
        fix = _overhead_fix(ctx) if overhead else _fix_for(lead)
        if overhead:
            title += ", on the host before they queue their GPU work"
    elif frame:
        title = (
            f"The GPU idles {pct(share)} % of the step with nothing queued while the host runs "
            f"Python outside any op: {frame} ({pct(min(in_frame / idle, 1.0))} % of that time)"
        )
        fix = _fix_for(frame)
    else:
        title = (
            f"The GPU idles {pct(share)} % of the step with nothing queued while the host runs "
            "code outside any op (Python between ops, at the step's edges or between kernels)"
        )
        fix = _fix_for("that code")
    return [
        Finding(
            id="host-work",
            status=status,
            title=title,
            evidence=tuple(evidence),
            fix=fix,
            group=GROUP,
            details=details,
            gain=share,
        )
    ]


_PHASE_LABELS = {
    "dataloader": "DataLoader",
    "forward": "forward",
    "backward": "backward",
    "optimizer": "optimizer",
    "cpu_ops": "other ops",
    "other": "other",  # Python between ops, code the profiler does not record
}


def _whole_percents(shares: dict[str, float]) -> dict[str, int]:
    """Shares that add up to 1 as whole percents that add up to 100 (largest remainder)."""
    raw = {k: 100.0 * v for k, v in shares.items()}
    out = {k: int(v) for k, v in raw.items()}
    left = 100 - sum(out.values())
    for k in sorted(raw, key=lambda k: out[k] - raw[k])[: max(left, 0)]:
        out[k] += 1
    return out


def _phases(ctx: TraceContext) -> tuple[str, list[Evidence]]:
    """Where the step goes on the host (:mod:`..phases`): its phases as the title names them
    ("DataLoader 72 %, forward 12 %, ...") and their evidence (each one's median per step and
    share of the steps' time)."""
    share, median = ctx.host_phase_share
    if not share:
        return "", []
    marked = "forward" in share
    labels = dict(_PHASE_LABELS)
    training = any(share[p] > 0 for p in ("backward", "optimizer"))
    if not marked and training:  # the forward's ops cannot be told from the others
        labels["cpu_ops"] = "forward and other ops"
    elif not marked:  # no step of training in sight: the ops are just ops
        labels["cpu_ops"] = "CPU ops"
    order = ["dataloader", "forward" if marked else "cpu_ops", "backward", "optimizer"]
    order += ["cpu_ops", "other"] if marked else ["other"]
    whole = _whole_percents(share)
    named = ", ".join(f"{labels[p]} {whole[p]} %" for p in order if whole[p] > 0)
    evidence = [Evidence("step_median", round(float(np.median(ctx.step_durations)), 1), "µs")]
    for p in (p for p in order if share[p] > 0):  # all of them in the summary's JSON
        evidence.append(Evidence(f"{p}_median", round(median[p], 1), "µs"))
        evidence.append(Evidence(f"{p}_share", pct(share[p]), "%"))
    evidence.append(Evidence("forward_marked", marked))
    return named, evidence


def _host_only(ctx: TraceContext) -> list[Finding]:
    """Where the step goes on the host of a trace without GPU activity (a CPU-only run, or a GPU
    run whose GPU side was not recorded): its phases (DataLoader, forward, backward, optimizer,
    other ops and the rest: :mod:`..phases`) by share of the steps' time, with the top-level ops by
    share as details. No claim about the GPU; a warning only when the host launched GPU work and
    an op that makes or copies inputs takes :data:`HOST_IDLE_WARN_BUSY_FRACTION` of the step."""
    top = np.nonzero(ctx.op_top & (ctx.op_step >= 0))[0]
    total = float(ctx.step_durations.sum())
    if top.size == 0 or total <= 0:
        return [no_gpu(ctx, "host-work", "Host work while the GPU idles")]
    by_name: dict[str, float] = {}
    for i in top:
        name = _shown(ctx.names[int(ctx.op_name[i])])
        by_name[name] = by_name.get(name, 0.0) + float(ctx.op_dur[i])
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1])
    lead, lead_us = ranked[0]
    share = lead_us / total
    launches = int(ctx.kernel_launch_mask.sum())
    phases, phase_evidence = _phases(ctx)
    evidence = (
        *phase_evidence,
        Evidence("top_op", lead),
        Evidence("top_op_share_of_step", pct(share), "%"),
        Evidence("gpu_activities", 0),
        Evidence("kernel_launches", launches),
        Evidence("threshold", pct(HOST_IDLE_WARN_BUSY_FRACTION), "%"),
    )
    details = tuple(f"{n}: {v / 1e3:,.2f} ms ({pct(v / total)} %)" for n, v in ranked[:8])
    feeds = P.HOST_INPUT_OP.matches(lead) or P.TRANSFER_OP.matches(lead)
    ops = ", ".join(f"{n} {pct(v / total)} %" for n, v in ranked[:_NAMED])
    where = (
        f"the host launched {launches} kernels but the trace has no GPU activity"
        if launches
        else no_gpu_text(ctx)
        if ctx.accelerator
        else "no GPU in the trace"
    )
    if launches and feeds and share >= HOST_IDLE_WARN_BUSY_FRACTION:
        return [
            Finding(
                id="host-work",
                status=Status.WARN,
                title=f"{pct(share)} % of the step is {lead} on the CPU, feeding a GPU run "
                f"({where}): {ops}",
                evidence=evidence,
                fix=_fix_for(lead),
                group=GROUP,
                details=details,
                gain=share,
            )
        ]
    return [
        Finding(
            id="host-work",
            status=Status.INFO,
            title=f"Where the step goes on the host ({where}): {phases or ops + ' of the step'}",
            evidence=evidence,
            group=GROUP,
            details=details,
        )
    ]


def _edge(ctx: TraceContext, t: float, before: bool) -> str:
    """The name of the host event that ends last before ``t`` (``before``) or starts first
    after it, over cpu_ops and runtime calls ("" when none)."""
    best, name = None, ""
    for ts, dur, nm in ((ctx.op_ts, ctx.op_dur, ctx.op_name), (ctx.rt_ts, ctx.rt_dur, ctx.rt_name)):
        if ts.size == 0:
            continue
        if before:
            end = ts + dur
            m = end <= t
            if m.any():
                i = int(np.argmax(np.where(m, end, -np.inf)))
                if best is None or end[i] > best:
                    best, name = float(end[i]), ctx.names[int(nm[i])]
        else:
            m = ts >= t
            if m.any():
                i = int(np.argmin(np.where(m, ts, np.inf)))
                if best is None or ts[i] < best:
                    best, name = float(ts[i]), ctx.names[int(nm[i])]
    return name


@rule("untraced-host")
def untraced_host(ctx: TraceContext) -> list[Finding]:
    """GPU idle time under which the host recorded nothing for 1 ms or more: code the profiler
    does not see (Python without with_stack, a first TorchScript or compiled call, a library's
    own threads). It is not launch overhead, and no op can be blamed for it."""
    if not ctx.has_gpu:
        return [no_gpu(ctx, "untraced-host", "Untraced host time")]
    what = "Untraced host time"
    skip = no_activity(ctx, "untraced-host", what) or capture_skip(ctx, "untraced-host", what)
    if skip:
        return skip
    idle, share, busy, (s, e) = _totals(ctx, "untraced")
    # the idle pieces of the holes (a hole's few µs beside a kernel are not a gap of their own)
    keep = (e - s) >= UNTRACED_MIN_GAP_US
    s, e = s[keep], e[keep]
    evidence = [
        Evidence("gpu_idle_untraced", round(idle, 1), "µs"),
        Evidence("share_of_step_median", pct(share), "%"),
        Evidence("gaps", int(s.size)),
        Evidence("largest_gap", round(float((e - s).max()), 1) if s.size else 0.0, "µs"),
        Evidence("with_stack", ctx.has_stack),
        Evidence("min_gap", UNTRACED_MIN_GAP_US, "µs"),
        Evidence("threshold", pct(HOST_IDLE_WARN_FRACTION), "%"),
    ]
    order = np.argsort(-(e - s), kind="stable")[:5]
    details = tuple(
        f"{(e[i] - s[i]) / 1e3:,.2f} ms with nothing traced, after "
        f"{_edge(ctx, float(s[i]), True) or 'the start'}, before "
        f"{_edge(ctx, float(e[i]), False) or 'the end'}"
        for i in order
    )
    status = _status(share, busy)
    if status is Status.OK or not s.size:  # no gap long enough to point at: nothing to blame
        return [
            Finding(
                id="untraced-host",
                status=Status.OK,
                title=f"Untraced host time: {pct(share)} % of the step ({per_step(ctx)})",
                evidence=tuple(evidence),
                group=GROUP,
                details=details,
            )
        ]
    i = int(order[0])
    return [
        Finding(
            id="untraced-host",
            status=status,
            title=f"The GPU idles {pct(share)} % of the step while the host runs code the "
            f"profiler does not record: {s.size} {'gap' if s.size == 1 else 'gaps'} of 1 ms or "
            "more with no op, the largest "
            f"{(e[i] - s[i]) / 1e3:,.1f} ms after {_edge(ctx, float(s[i]), True) or 'the start'}",
            evidence=tuple(evidence),
            fix=(
                "record the host too: torch.profiler.profile(activities=[ProfilerActivity.CPU, "
                "ProfilerActivity.CUDA]) (this trace has no cpu_op at all)"
                if ctx.op_ts.size == 0
                else "see what runs there: profile with with_stack=True, wrap the step's parts "
                "in torch.profiler.record_function('name'), or sample the Python side (py-spy); "
                + remedy(ctx, "first-call")
            ),
            group=GROUP,
            details=details,
            gain=share,
        )
    ]
