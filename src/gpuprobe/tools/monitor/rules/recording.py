"""The recording itself: a lost GPU, a missing end line, damaged lines, the command's exit code,
too few samples to judge, and what gpuprobe's own sampler cost."""

from __future__ import annotations

import math
import signal

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.monitor.rules._common import GROUP
from gpuprobe.tools.monitor.summary import RunContext

__all__ = [
    "INTERRUPT_CODES",
    "SAMPLER_COST_WARN_PERCENT",
    "damaged_lines",
    "exit_status",
    "incomplete",
    "lost_gpus",
    "sampler_cost",
    "too_short",
]

# Exit codes of a command stopped by the user's Ctrl-C: 128 + SIGINT (the shell's convention, and
# what gpuprobe run records for a child killed by SIGINT) and -SIGINT (Popen's returncode).
INTERRUPT_CODES = (128 + 2, -2)
SAMPLER_COST_WARN_PERCENT = 1.0  # % of one core; the goal at 2 Hz


def _exit_text(code: int | None) -> str:
    if code is None:
        return "unknown"
    if code > 128 and code - 128 < 65:
        try:
            return f"{code} ({signal.Signals(code - 128).name})"
        except ValueError:
            pass
    return str(code)


@rule("gpu-lost")
def lost_gpus(ctx: RunContext) -> list[Finding]:
    """``gpu-lost``: a GPU of the header that NVML reported lost (fallen off the bus)."""
    from gpuprobe.platform.hardware.nvml import lost_gpu_finding

    return [
        lost_gpu_finding(g.label, g.nvml_error, g.index) for g in ctx.timeline.header.gpus if g.lost
    ]


@rule("monitor-incomplete")
def incomplete(ctx: RunContext) -> list[Finding]:
    """``monitor-incomplete``: no end line (gpuprobe stopped before the command finished)."""
    tl = ctx.timeline
    if tl.end is not None:
        return []
    return [
        Finding(
            id="monitor-incomplete",
            status=Status.WARN,
            title="The recording has no end line: gpuprobe stopped before the command finished "
            "(killed?); every sample up to the last flush is kept",
            evidence=(
                Evidence("samples", ctx.samples, ""),
                Evidence("duration", round(tl.duration_s, 1), "s"),
            ),
            fix="Nothing to fix in the job; let gpuprobe run to the end for an exit code",
            group=GROUP,
            subject="recording",
        )
    ]


@rule("monitor-timeline-damaged")
def damaged_lines(ctx: RunContext) -> list[Finding]:
    """``monitor-timeline-damaged``: lines of the timeline that could not be read."""
    tl = ctx.timeline
    if not tl.dropped_lines:
        return []
    return [
        Finding(
            id="monitor-timeline-damaged",
            status=Status.INFO,
            title=f"Dropped {tl.dropped_lines} damaged line(s) ({tl.dropped_bytes} bytes) of "
            f"the timeline; the {ctx.samples} whole samples are used",
            evidence=(
                Evidence("dropped_lines", tl.dropped_lines, ""),
                Evidence("dropped_bytes", tl.dropped_bytes, "B"),
            ),
            group=GROUP,
            subject="recording",
            details=tuple(tl.problems),
        )
    ]


def _exited(ctx: RunContext) -> bool:
    """The recording has an end line with the exit code of a command."""
    tl = ctx.timeline
    return tl.end is not None and bool(tl.header.command) and tl.exit_code is not None


@rule("monitor-interrupted", "monitor-exit", applies=_exited)
def exit_status(ctx: RunContext) -> list[Finding]:
    """``monitor-interrupted`` (the user's Ctrl-C) or ``monitor-exit`` (the exit code), for a
    command that ran to its end."""
    tl = ctx.timeline
    code = tl.exit_code
    if code in INTERRUPT_CODES:
        # the user's Ctrl-C: a choice, not a failure of the command
        return [
            Finding(
                id="monitor-interrupted",
                status=Status.INFO,
                title=f"{ctx.command} was stopped with Ctrl-C (exit code {_exit_text(code)}); "
                "the summary covers the part that ran",
                evidence=(
                    Evidence("exit_code", code, ""),
                    Evidence("duration", round(tl.duration_s, 2), "s"),
                ),
                group=GROUP,
                subject="command",
            )
        ]
    return [
        Finding(
            id="monitor-exit",
            status=Status.OK if code == 0 else Status.FAIL,
            title=f"{ctx.command} exited with code {_exit_text(code)}",
            evidence=(
                Evidence("exit_code", code, ""),
                Evidence("duration", round(tl.duration_s, 2), "s"),
            ),
            fix="" if code == 0 else "Read the command's own output above the summary",
            group=GROUP,
            subject="command",
        )
    ]


@rule("monitor-too-short")
def too_short(ctx: RunContext) -> list[Finding]:
    """``monitor-too-short``: fewer than :data:`~gpuprobe.tools.monitor.summary.MIN_SAMPLES` samples,
    so the GPU and host rules stay silent."""
    if ctx.enough_samples:
        return []
    return [
        Finding(
            id="monitor-too-short",
            status=Status.SKIPPED,
            title=f"Only {ctx.samples} sample(s): too few to judge GPU and CPU use",
            evidence=(
                Evidence("samples", ctx.samples, ""),
                Evidence("hz", ctx.timeline.header.hz, "Hz"),
            ),
            fix="Record longer, or raise --hz (up to 20)",
            group=GROUP,
            subject="recording",
        )
    ]


def _costliest_call(end: object, samples: int) -> tuple[Evidence, ...]:
    """The NVML call kind that cost the sampler the most CPU, from the end line's
    ``nvml_call_ms`` (recordings before it, or a damaged one, give nothing)."""
    calls = end.get("nvml_call_ms") if isinstance(end, dict) else None
    if not isinstance(calls, dict) or samples <= 0:
        return ()
    cpu: dict[str, float] = {}
    for name, c in calls.items():
        v = c.get("cpu_ms") if isinstance(c, dict) else None
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0:
            cpu[str(name)] = float(v)
    if not cpu:
        return ()
    name = max(cpu, key=lambda k: cpu[k])
    return (
        Evidence("nvml_cpu_per_sample", round(sum(cpu.values()) / samples, 3), "ms"),
        Evidence("costliest_nvml_call", name),
        Evidence("its_cpu_per_sample", round(cpu[name] / samples, 3), "ms"),
    )


@rule("monitor-sampler-cost")
def sampler_cost(ctx: RunContext) -> list[Finding]:
    """``monitor-sampler-cost``: the sampler's CPU as a share of one core (a warning above
    :data:`SAMPLER_COST_WARN_PERCENT`, scaled with the rate above 2 Hz), and which NVML call
    kind cost it most where the recording says."""
    tl = ctx.timeline
    cost = ctx.sampler_cost
    if cost is None or not ctx.samples:
        return []
    return [
        Finding(
            id="monitor-sampler-cost",
            status=Status.WARN
            if cost > SAMPLER_COST_WARN_PERCENT * max(1.0, tl.header.hz / 2)
            else Status.INFO,
            title=f"gpuprobe's sampler used {cost:.2f}% of one core at {tl.header.hz:g} Hz",
            evidence=(
                Evidence("sampler_cpu", round(tl.sampler_cpu_s, 3), "s"),
                Evidence("sampler_cost", round(cost, 3), "%"),
                Evidence("samples", ctx.samples, ""),
                *(  # an older recording's end line lacks it, a cut one has no end line
                    (Evidence("missed_ticks", missed, ""),)
                    if (missed := (tl.end or {}).get("missed_ticks")) is not None
                    else ()
                ),
                *_costliest_call(tl.end, ctx.samples),
            ),
            fix="",
            group=GROUP,
            subject="gpuprobe",
        )
    ]
