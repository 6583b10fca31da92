"""The rules that judge a batch-size search (:class:`~gpuprobe.tools.memory.fit.FitResult`): the
largest size that fits, where throughput flattens (E9's knee: docs/experiments.md#e9), or that
nothing fits."""

from __future__ import annotations

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import Rule, rule
from gpuprobe.core.units import count, size
from gpuprobe.platform.hardware.host import usable_cores
from gpuprobe.platform.hardware.load import host_busy_finding
from gpuprobe.tools.memory.model import KNEE_FRACTION, FitResult

__all__ = ["RULES_FIT", "fit_host_busy", "fit_knee", "fit_largest", "nothing_fits"]


def _search_evidence(r: FitResult) -> tuple[Evidence, ...]:
    return (
        Evidence("search_trials", r.search_trials),
        Evidence("trial_bound", r.trial_bound),
        Evidence("tolerance", round(100 * r.tolerance, 1), "%"),
    )


def _something_fits(r: FitResult) -> bool:
    return r.best is not None


_SHRINK = "shrink the model: mixed precision, activation checkpointing"


def _nothing_fits_fix(r: FitResult) -> str:
    """What to change when nothing fits, for this search: the cap it was given (raise it), the
    GPU's memory (free it: nvidia-smi, torch's cache) or the host's (other processes)."""
    if r.memory_limit is not None:
        return (
            f"raise the memory cap (it was {size(r.memory_limit)}: --memory-limit, memory_limit= "
            f"in Python) or leave it out, or {_SHRINK}"
        )
    if r.device.startswith("cuda"):
        return (
            "free GPU memory first (other processes: nvidia-smi; torch.cuda.empty_cache()), "
            f"or {_SHRINK}"
        )
    return f"free host memory first (other processes: see 'gpuprobe top'), or {_SHRINK}"


@rule("fit-nothing-fits", applies=lambda r: r.best is None)
def nothing_fits(r: FitResult) -> list[Finding]:
    """Even the smallest batch runs out of memory."""
    smallest = r.trials[0] if r.trials else None
    return [
        Finding(
            id="fit-nothing-fits",
            status=Status.FAIL,
            title=f"even the smallest batch ({r.smallest}) "
            + (
                f"peaks over the {size(r.memory_limit)} cap"
                if smallest is not None and smallest.over_cap and r.memory_limit is not None
                else "runs out of memory"
            ),
            evidence=(*_search_evidence(r), *_cap_evidence(r)),
            fix=_nothing_fits_fix(r),
            group="fit",
            details=(smallest.error,) if smallest and smallest.error else (),
        )
    ]


@rule("fit-no-limit", "fit-largest", applies=_something_fits)
def fit_largest(r: FitResult) -> list[Finding]:
    """The largest batch that fits, or that every size tried fits."""
    ev_search = _search_evidence(r)
    best_t = next((t for t in r.trials if t.batch_size == r.best), None)
    if r.first_fail is None:
        return [
            Finding(
                id="fit-no-limit",
                status=Status.INFO,
                title=f"every size up to {r.largest} fits: the limit is higher",
                evidence=(*ev_search, Evidence("largest_tried", r.largest)),
                fix=f"search higher: batch_sizes=range({r.smallest}, {4 * r.largest + 1})",
                group="fit",
            )
        ]
    return [
        Finding(
            id="fit-largest",
            status=Status.OK,
            title=f"largest batch that fits: {r.best} ({_fails(r)})",
            evidence=(
                Evidence("best", r.best),
                Evidence("first_fail", r.first_fail),
                Evidence("peak_memory", best_t.peak_memory if best_t else None, "B"),
                *ev_search,
                *_cap_evidence(r),
            ),
            fix=f"batch_size = {r.best}",
            group="fit",
        )
    ]


def _fails(r: FitResult) -> str:
    """How the first size that failed failed: out of memory, or over the cap."""
    t = next((t for t in r.trials if t.batch_size == r.first_fail), None)
    if t is not None and t.over_cap and r.memory_limit is not None:
        return f"{r.first_fail} peaks at {size(t.peak_memory)}, over the {size(r.memory_limit)} cap"
    return f"{r.first_fail} runs out of memory"


def _cap_evidence(r: FitResult) -> tuple[Evidence, ...]:
    """Under an address-space cap: what each trial process had mapped when the cap was set (on
    top of which the cap sits) and how much of the cap went before the step ran."""
    if r.memory_limit is None or r.cap_baseline is None:
        return ()
    return (
        Evidence("memory_limit", r.memory_limit, "B"),
        Evidence("cap_baseline", r.cap_baseline, "B"),
        Evidence("cap_overhead", r.cap_overhead, "B"),
    )


@rule("fit-knee", applies=_something_fits)
def fit_knee(r: FitResult) -> list[Finding]:
    """Where throughput flattens: the smallest batch within KNEE_FRACTION of the best."""
    assert r.best is not None
    timed = [t for t in r.trials if t.fits and t.throughput]
    if r.knee is None or r.best_throughput_batch is None or len(timed) < 2:
        return []
    top = max(t.throughput or 0 for t in timed)
    k = next(t for t in timed if t.batch_size == r.knee)
    flat = r.knee < r.best
    return [
        Finding(
            id="fit-knee",
            status=Status.INFO,
            title=(
                f"throughput flattens from batch {r.knee}: {count(k.throughput)} samples/s, "
                f"{100 * (k.throughput or 0) / top:.0f} % of the best "
                f"({count(top)} at {r.best_throughput_batch})"
            ),
            evidence=(
                Evidence("knee", r.knee),
                Evidence("knee_throughput", round(k.throughput or 0, 2), "samples/s"),
                Evidence("best_throughput", round(top, 2), "samples/s"),
                Evidence("knee_fraction", round(100 * KNEE_FRACTION), "%"),
            ),
            fix=(
                f"batch_size = {r.knee} gives {100 * (k.throughput or 0) / top:.0f} % of the "
                f"best throughput with less memory than {r.best}"
                if flat
                else ""
            ),
            group="fit",
        )
    ]


def _others_measured(r: FitResult) -> bool:
    return r.others_cores is not None


@rule("fit-host-busy", applies=_others_measured)
def fit_host_busy(r: FitResult) -> list[Finding]:
    """Other processes kept this process's usable cores busy during the search (measured by
    :func:`~gpuprobe.tools.memory.fit.fit`)."""
    busy = host_busy_finding(
        "fit-host-busy",
        "the batch-size search",
        r.others_cores,
        usable_cores(),
        effect="the step times and the throughput curve (and its knee) are slowed and noisy; "
        "which sizes fit is not affected",
        fix="re-run when the machine is idle (see 'gpuprobe top') before choosing a batch size "
        "by throughput",
        group="fit",
        subject="host",
    )
    return [] if busy is None else [busy]


# In the order the result lists them: what fits, where throughput flattens, then the host's load.
RULES_FIT: tuple[Rule, ...] = (nothing_fits, fit_largest, fit_knee, fit_host_busy)
