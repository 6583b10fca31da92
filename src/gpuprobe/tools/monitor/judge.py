"""Judge a recording: its statistics, computed once (:mod:`gpuprobe.tools.monitor.summary`), run
through the rules of :mod:`gpuprobe.tools.monitor.rules` into a
:class:`~gpuprobe.tools.monitor.summary.RunSummary` with its findings, worst first."""

from __future__ import annotations

from gpuprobe.core.findings import worst_first
from gpuprobe.tools.monitor.rules import run_rules
from gpuprobe.tools.monitor.summary import RunSummary, run_context
from gpuprobe.tools.monitor.timeline import Timeline

__all__ = ["summarize"]


def summarize(tl: Timeline) -> RunSummary:
    """Judge a recording: numbers per GPU and for the host, and the findings, worst first."""
    ctx = run_context(tl)
    cost = ctx.sampler_cost
    return RunSummary(
        command=tl.header.command,
        duration_s=round(tl.duration_s, 3),
        samples=ctx.samples,
        hz=tl.header.hz,
        exit_code=tl.exit_code,
        complete=tl.end is not None,
        dropped_lines=tl.dropped_lines,
        sampler_cpu_s=round(tl.sampler_cpu_s, 4),
        sampler_cost_percent=round(cost, 3) if cost is not None else None,
        driver_status=tl.header.driver.status,
        gpus=ctx.gpus,
        host=ctx.host,
        findings=tuple(worst_first(run_rules(ctx))),
        steps=ctx.steps,
    )
