"""Input: time the training loop spends waiting in the DataLoader's ``__next__`` (E9, E10:
docs/experiments.md#e9, #e10)."""

from __future__ import annotations

import numpy as np

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.rules._common import GROUP, median, pct, steady_steps, step_range

__all__ = ["DATALOADER_WARN_FRACTION", "input_bound"]

DATALOADER_WARN_FRACTION = 0.05  # of step time; torch-tb-profiler's DataLoader recommendation


@rule("input-bound")
def input_bound(ctx: TraceContext) -> list[Finding]:
    """DataLoader ``__next__`` time as a share of each step, and a single-process loader."""
    dl = P.DATALOADER_NEXT.mask(ctx.ann_name, ctx.names)
    if not dl.any():
        return [
            Finding(
                id="input-bound",
                status=Status.SKIPPED,
                title="Input pipeline: skipped: no DataLoader in the trace "
                "(iterate a torch DataLoader inside the profiled steps to judge it)",
                group=GROUP,
            )
        ]
    n = len(ctx.steps)
    m = dl & (ctx.ann_step >= 0)
    per = np.bincount(ctx.ann_step[m], weights=ctx.ann_dur[m], minlength=n)
    share = per / np.maximum(ctx.step_durations, 1e-9)
    med = median(share)
    # the GPU's idle time while the loader ran (one cause per idle instant): with the GPU busy
    # meanwhile (the host runs ahead), a slow loader costs nothing
    idle_share = ctx.idle_of_cause("input") / steady_steps(ctx)
    idle_med = median(idle_share) if ctx.has_gpu else None
    kinds = sorted({ctx.names[i] for i in np.unique(ctx.ann_name[dl])})
    single = any(P.SINGLE_PROCESS_LOADER.matches(k) for k in kinds)
    evidence = (
        Evidence("dataloader_share_median", pct(med), "%"),
        Evidence("dataloader_share_worst_step", pct(float(share.max())) if n else None, "%"),
        Evidence("dataloader_per_step_median", round(median(per), 1), "µs"),
        Evidence("gpu_idle_while_loading", pct(idle_med), "%"),
        Evidence("num_workers", 0 if single else ">0"),
        Evidence("threshold", pct(DATALOADER_WARN_FRACTION), "%"),
    )
    details = tuple(
        f"{'trace' if s.number is None else '#' + str(s.number)}: DataLoader {per[i]:.0f} µs of "
        f"{ctx.step_durations[i]:.0f} µs ({100 * share[i]:.1f} %)"
        for i, s in enumerate(ctx.steps)
    )
    if med <= DATALOADER_WARN_FRACTION:
        return [
            Finding(
                id="input-bound",
                status=Status.OK,
                title=f"DataLoader takes {pct(med)} % of step time ({step_range(ctx)})",
                evidence=evidence,
                group=GROUP,
                details=details,
            )
        ]
    if idle_med is not None and idle_med < DATALOADER_WARN_FRACTION:
        return [
            Finding(
                id="input-bound",
                status=Status.INFO,
                title=f"The DataLoader takes {pct(med)} % of the host's step time, but the GPU "
                f"stays busy meanwhile (idle {pct(idle_med)} % of the step while loading)",
                evidence=evidence,
                group=GROUP,
                details=details,
            )
        ]
    how = "a single-process DataLoader (num_workers=0)" if single else "the DataLoader"
    fix = (
        "DataLoader(..., num_workers=4, pin_memory=True, persistent_workers=True, "
        "prefetch_factor=2), then .to(device, non_blocking=True)"
    )
    if not single:
        fix = (
            "more workers (num_workers up to the free cores), cheaper __getitem__ (decode and "
            "augment on the GPU), pin_memory=True; " + fix
        )
    return [
        Finding(
            id="input-bound",
            status=Status.WARN,
            title=f"Input-bound: {pct(med)} % of each step waits for {how}"
            + (
                ""
                if idle_med is None
                else f"; the GPU idles {pct(idle_med)} % of the step meanwhile"
            ),
            evidence=evidence,
            fix=fix,
            group=GROUP,
            details=details,
            gain=idle_med if idle_med is not None else med,
        )
    ]
