"""The rules that judge an out-of-memory report: what failed, why, and what to do.

Each rule reads an :class:`~gpuprobe.tools.memory.oom.report.OomReport` (the error as classified
and the memory as read): the failure itself, fragmentation of torch's cache, other processes on
the card, CuPy's pool, the largest live tensors, what was given back, and the remedies, cheapest
first. Every threshold is a named constant with its source.

Units: bytes.
"""

from __future__ import annotations

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import Rule, rule
from gpuprobe.core.units import size
from gpuprobe.tools.memory.oom.classify import OomError
from gpuprobe.tools.memory.oom.report import OomReport

__all__ = [
    "FRAGMENTATION_WARN_FRACTION",
    "OTHER_PROCESSES_WARN_FRACTION",
    "RULES_OOM",
    "cache_fragmentation",
    "cupy_pool",
    "largest_tensors",
    "oom_error",
    "other_processes",
    "released",
    "what_to_do",
]

# Reserved-but-unallocated bytes (the caching allocator's free pieces), as a fraction of
# reserved, above which the failure is called fragmentation. torch's own OOM message says "If
# reserved but unallocated memory is large try setting ...expandable_segments:True"; 0.2 is
# gpuprobe's reading of "large" (one in five cached bytes is unusable for the request).
FRAGMENTATION_WARN_FRACTION = 0.2
# Memory other processes hold on the card, as a fraction of its total, above which they are
# named as a cause. gpuprobe's choice: a tenth of the card is more than a typical batch.
OTHER_PROCESSES_WARN_FRACTION = 0.1


_ENV_NAME = "PYTORCH_CUDA_ALLOC_CONF"


def _has_error(r: OomReport) -> bool:
    return r.error is not None


@rule("oom-error", applies=_has_error)
def oom_error(r: OomReport) -> list[Finding]:
    """The failure: what ran out of memory where, and how much it asked for."""
    e = r.error
    assert e is not None
    if e.kind == "host":
        where = "host memory (RAM)"
    else:
        where = f"GPU {e.device}" if e.device is not None else "the GPU"
    ev = [Evidence("requested", e.requested, "B")]
    if e.kind == "cuda":
        ev += [Evidence("free", e.free, "B"), Evidence("total", e.total or r.gpu_total, "B")]
    else:
        ev += [Evidence("host_available", r.host_available, "B")]
    return [
        Finding(
            id="oom-error",
            status=Status.FAIL,
            title=f"{e.framework} ran out of memory on {where}: tried to allocate "
            f"{size(e.requested)}",
            evidence=tuple(ev),
            # named, not "see below": a report's text shows no fix lines, and JSON has no below
            fix="make the step smaller (batch size: gpuprobe.fit(step) finds the largest "
            "that fits), or give memory back before it (the finding 'what to do, cheapest "
            "first' lists how)",
            group="oom",
            details=(e.message,),
        )
    ]


@rule("oom-fragmentation")
def cache_fragmentation(r: OomReport) -> list[Finding]:
    """How much of torch's cache is reserved but unallocated, and whether that is
    fragmentation: by the error message's own figures, which describe the moment it failed,
    when it has them; else by this process's cache as read for the report (labelled "now")."""
    e = r.error
    if e is not None and e.reserved and e.allocated is not None:
        reserved, allocated, inactive = e.reserved, e.allocated, None
        when, source = "at the failure, {} of torch's {} cache was", "error message"
    elif r.reserved and r.allocated is not None:
        reserved, allocated, inactive = r.reserved, r.allocated, r.inactive_split
        when, source = "now, {} of torch's {} cache is", "this process now"
    else:
        return []
    unused = max(0, reserved - allocated)
    frac = unused / reserved
    requested = e.requested if e else None
    fragmented = frac >= FRAGMENTATION_WARN_FRACTION or (
        requested is not None and unused >= requested
    )
    conf = r.allocator_env.get(_ENV_NAME, "") + r.allocator_env.get("PYTORCH_ALLOC_CONF", "")
    has_expandable = "expandable_segments:True" in conf
    return [
        Finding(
            id="oom-fragmentation",
            status=Status.WARN if fragmented and not has_expandable else Status.OK,
            title=(
                when.format(size(unused), size(reserved))
                + f" reserved but unallocated ({100 * frac:.0f} %)"
                + (": fragmentation" if fragmented else "")
            ),
            evidence=(
                Evidence("allocated", allocated, "B"),
                Evidence("reserved", reserved, "B"),
                Evidence("reserved_unallocated", unused, "B"),
                Evidence("inactive_split", inactive, "B"),
                Evidence("fraction", round(100 * frac, 1), "%"),
                Evidence("source", source),
            ),
            fix=(
                f"export {_ENV_NAME}=expandable_segments:True  (before the process starts)"
                if fragmented and not has_expandable
                else ""
            ),
            group="oom",
        )
    ]


@rule("oom-other-processes", applies=lambda r: bool(r.gpu_total) and r.holders is not None)
def other_processes(r: OomReport) -> list[Finding]:
    """The memory other processes hold on the card, named when it is a cause."""
    assert r.gpu_total
    others = [h for h in r.holders if not h.this_process]
    other_bytes = sum(h.used_memory or 0 for h in others)
    frac = other_bytes / r.gpu_total
    busy = frac >= OTHER_PROCESSES_WARN_FRACTION
    names = ", ".join(f"pid {h.pid} {h.name or '?'} {size(h.used_memory)}" for h in others[:5])
    return [
        Finding(
            id="oom-other-processes",
            status=Status.WARN if busy else Status.OK,
            title=(
                f"other processes hold {size(other_bytes)} "
                f"({100 * frac:.0f} %) of {r.gpu_name or 'the card'}"
                + (f": {names}" if names else "")
            ),
            evidence=(
                Evidence("other_processes", len(others)),
                Evidence("other_bytes", other_bytes, "B"),
                Evidence("gpu_total", r.gpu_total, "B"),
            ),
            fix=(
                "stop them or pick a free card: nvidia-smi; CUDA_VISIBLE_DEVICES=<free index>"
                if busy
                else ""
            ),
            group="oom",
        )
    ]


@rule(
    "oom-cupy-pool",
    applies=lambda r: bool(r.cupy_reserved) and r.cupy_reserved - (r.cupy_allocated or 0) > 0,
)
def cupy_pool(r: OomReport) -> list[Finding]:
    """What CuPy's pool holds without using it."""
    assert r.cupy_reserved
    held = r.cupy_reserved - (r.cupy_allocated or 0)
    return [
        Finding(
            id="oom-cupy-pool",
            status=Status.INFO,
            title=f"CuPy's pool holds {size(held)} it is not using",
            evidence=(
                Evidence("cupy_allocated", r.cupy_allocated, "B"),
                Evidence("cupy_reserved", r.cupy_reserved, "B"),
            ),
            fix="cupy.get_default_memory_pool().free_all_blocks()",
            group="oom",
        )
    ]


@rule("oom-largest-tensors", applies=lambda r: bool(r.tensors))
def largest_tensors(r: OomReport) -> list[Finding]:
    """The largest live tensors, on the card when any are."""
    on_card = [t for t in r.tensors if t.device.startswith("cuda")]
    on_gpu = on_card or list(r.tensors)
    total = sum(t.bytes for t in on_gpu)
    params = sum(t.bytes for t in on_gpu if t.parameter)
    return [
        Finding(
            id="oom-largest-tensors",
            status=Status.INFO,
            title=f"the {len(on_gpu)} largest live tensors hold {size(total)} "
            f"({size(params)} of it parameters)",
            evidence=(
                Evidence("largest", on_gpu[0].bytes, "B"),
                Evidence("listed_bytes", total, "B"),
                Evidence("parameter_bytes", params, "B"),
            ),
            fix="del the tensors you no longer need"
            + (", or move data off the card: x = x.cpu()" if on_card else ""),
            group="oom",
            details=tuple(str(t) for t in on_gpu),
        )
    ]


@rule("oom-released", applies=lambda r: r.released)
def released(r: OomReport) -> list[Finding]:
    """What giving the memory back returned."""
    before = r.reserved
    after = r.reserved_after
    given = (before - after) if before is not None and after is not None else None
    title = (
        f"memory given back: torch's cache {size(before)} -> {size(after)}"
        if given is not None
        else "memory given back: frames cleared, garbage collected, caches emptied"
    )
    if r.gpu_used is not None and r.gpu_used_after is not None:
        title += f"; card {size(r.gpu_used)} -> {size(r.gpu_used_after)} used"
    return [
        Finding(
            id="oom-released",
            status=Status.OK,
            title=title,
            evidence=(
                Evidence("reserved_before", before, "B"),
                Evidence("reserved_after", after, "B"),
                Evidence("gpu_used_before", r.gpu_used, "B"),
                Evidence("gpu_used_after", r.gpu_used_after, "B"),
            ),
            group="oom",
        )
    ]


@rule("oom-what-to-do", applies=_has_error)
def what_to_do(r: OomReport) -> list[Finding]:
    """The remedies for this kind of error, cheapest first."""
    assert r.error is not None
    return [
        Finding(
            id="oom-what-to-do",
            status=Status.INFO,
            title="what to do, cheapest first",
            fix="halve the batch size (gpuprobe.fit(step, batch_sizes=range(1, 4097)) finds "
            "the largest that fits)",
            group="oom",
            details=_remedies(r.error, r),
        )
    ]


def _remedies(e: OomError, r: OomReport) -> tuple[str, ...]:
    if e.kind == "host":
        return (
            "smaller batch: the failed allocation asked for "
            f"{size(e.requested)}, {size(r.host_available)} is available",
            "load data lazily or in chunks (Dask, memory-mapped arrays) instead of all at once",
            "use a smaller dtype: float32 or bfloat16 instead of float64",
        )
    return (
        "smaller batch size; keep the effective batch with gradient accumulation "
        "(loss / k; optimizer.step() every k steps)",
        "torch.cuda.empty_cache() after a failed step, so other processes and libraries "
        "(CuPy, NCCL) can use what torch's cache holds",
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True when reserved >> allocated "
        "(fragmentation)",
        "activation checkpointing: torch.utils.checkpoint.checkpoint(block, x, "
        "use_reentrant=False) trades compute for activation memory",
        "mixed precision: with torch.autocast('cuda', dtype=torch.bfloat16): halves activations",
        "move data off the card: keep the dataset on the CPU and copy each batch "
        "(pin_memory=True, .to('cuda', non_blocking=True)); x.cpu() for results you keep",
        "inference: wrap it in torch.inference_mode() so no activations are kept for backward",
    )


# In the order the report lists them: the failure, its causes, what came back, the remedies.
RULES_OOM: tuple[Rule, ...] = (
    oom_error,
    cache_fragmentation,
    other_processes,
    cupy_pool,
    largest_tensors,
    released,
    what_to_do,
)
