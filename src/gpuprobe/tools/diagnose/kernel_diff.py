"""Which kernels appeared, disappeared, got faster or slower between two traces (HTA's TraceDiff
idea, per kernel name), beside ``--compare``'s finding diff.

Kernels are compared by name over each trace's selected steps, per step (so a trace of 5 steps
compares with one of 10): count per step, GPU time per step and mean duration. A kernel present in
both is *slower* when its GPU time per step grew by at least :data:`KERNEL_CHANGE_FRACTION` and
:data:`KERNEL_CHANGE_MIN_US`, and *faster* when it shrank by as much, whether the calls got longer
or more numerous: a copy that runs 256 times as often at a seventh of the time per call takes more
of the step, and is slower. The list is ordered by the change in GPU time per step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gpuprobe.tools.diagnose.kernel_diff_model import (
    KERNEL_CHANGE_FRACTION,
    KERNEL_CHANGE_MIN_US,
    FamilyChange,
    KernelChange,
    KernelDiff,
)
from gpuprobe.tools.diagnose.kernels import FAMILIES, family_of_activities

if TYPE_CHECKING:
    from gpuprobe.tools.diagnose.analysis import TraceContext

__all__ = [
    "KERNEL_CHANGE_FRACTION",
    "KERNEL_CHANGE_MIN_US",
    "KERNEL_DIFF_ROWS",
    "FamilyChange",
    "KernelChange",
    "KernelDiff",
    "compare_kernels",
]

KERNEL_DIFF_ROWS = 50  # kernels kept in the record, largest change of GPU time per step first


def _per_name(ctx: TraceContext) -> tuple[dict[str, tuple[int, float, str]], np.ndarray, int]:
    """name -> (count, total µs, family) over the selected steps; family totals; step count."""
    sel = ctx.gpu_step >= 0
    fam = family_of_activities(ctx)[sel]
    names, dur = ctx.gpu_name[sel], ctx.gpu_dur[sel]
    fam_tot = np.bincount(fam, weights=dur, minlength=len(FAMILIES)) if fam.size else None
    out: dict[str, tuple[int, float, str]] = {}
    if names.size:
        uniq, first, inv = np.unique(names, return_index=True, return_inverse=True)
        counts = np.bincount(inv)
        totals = np.bincount(inv, weights=dur)
        for j, nid in enumerate(uniq.tolist()):
            out[ctx.names[nid]] = (
                int(counts[j]),
                float(totals[j]),
                FAMILIES[int(fam[first[j]])],
            )
    steps = max(len(ctx.steps), 1)
    return out, (fam_tot if fam_tot is not None else np.zeros(len(FAMILIES))), steps


def compare_kernels(
    ctx_before: TraceContext, ctx_after: TraceContext, *, rows: int = KERNEL_DIFF_ROWS
) -> KernelDiff:
    """Per-kernel-name comparison of two traces' selected steps (see the module docstring);
    the ``rows`` largest changes are kept."""
    b, fam_b, nb = _per_name(ctx_before)
    a, fam_a, na = _per_name(ctx_after)
    changes: list[KernelChange] = []
    counts = {"new": 0, "gone": 0, "faster": 0, "slower": 0, "same": 0}
    for name in b.keys() | a.keys():
        cb, tb, fb = b.get(name, (0, 0.0, ""))
        ca, ta, fa = a.get(name, (0, 0.0, ""))
        mb = tb / cb if cb else None
        ma = ta / ca if ca else None
        pb, pa = tb / nb, ta / na  # GPU time per step
        if mb is None:
            status = "new"
        elif ma is None:
            status = "gone"
        elif abs(pa - pb) < KERNEL_CHANGE_MIN_US or pb <= 0:
            status = "same"
        elif (pa - pb) / pb >= KERNEL_CHANGE_FRACTION:
            status = "slower"
        elif (pb - pa) / pb >= KERNEL_CHANGE_FRACTION:
            status = "faster"
        else:
            status = "same"
        counts[status] += 1
        changes.append(
            KernelChange(
                name=name,
                family=fa or fb,
                status=status,
                count_before=cb / nb,
                count_after=ca / na,
                total_before_us=tb / nb,
                total_after_us=ta / na,
                mean_before_us=mb,
                mean_after_us=ma,
            )
        )
    changes.sort(key=lambda r: (-abs(r.delta_us), r.name))
    return KernelDiff(
        before_path=ctx_before.raw.path,
        after_path=ctx_after.raw.path,
        steps_before=nb,
        steps_after=na,
        total_before_us=float(fam_b.sum()) / nb,
        total_after_us=float(fam_a.sum()) / na,
        families=tuple(
            FamilyChange(family=f, before_us=float(fam_b[i]) / nb, after_us=float(fam_a[i]) / na)
            for i, f in enumerate(FAMILIES)
            if fam_b[i] > 0 or fam_a[i] > 0
        ),
        changes=tuple(changes[:rows]),
        **counts,
    )
