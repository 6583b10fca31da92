"""Where the GPU time goes by kernel, and how long kernels take to get from the host to the GPU.

* :func:`kernel_breakdown`: time by kernel family (GEMM, convolution, attention, elementwise,
  reduction, communication, memcpy/memset, other; the named patterns in :mod:`.patterns`) for the
  whole trace and per step and device, and the top kernels by total time.
* :func:`provenance_of_name`: where a kernel's code comes from (:data:`PROVENANCES`): a
  library (cuBLAS, cuDNN, CUTLASS, rocBLAS, FBGEMM, ...), the framework (PyTorch's
  ATen), a compiler (Triton from torch.compile, XLA), a collective (NCCL/RCCL), or the user's
  own code (a CUDA extension, a CuPy or Numba kernel); the share of kernel time of each is in
  :class:`KernelBreakdown`.
* :func:`launch_stats`: HTA's ``get_cuda_kernel_launch_stats``: per launch, the CPU duration of
  the runtime call, the GPU duration of what it launched and the launch delay (GPU start − end of
  the call, clipped at 0), their distributions, and the short kernels and outliers by HTA's
  default cut-offs, each outlier named (kernel, step, value). A CUDA/HIP graph replay is one
  launch for all of its kernels.

Both read only a :class:`~.analysis.TraceContext` and count what the selected steps launched
(the whole trace when it has no ``ProfilerStep``). Times in µs; shares of summed GPU time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gpuprobe.core import render
from gpuprobe.core.records import Record
from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.kineto import GPU_KIND_KERNEL

if TYPE_CHECKING:
    from gpuprobe.tools.diagnose.analysis import TraceContext

__all__ = [
    "FAMILIES",
    "LAUNCH_DELAY_CUTOFF_US",
    "OUTLIERS_SHOWN",
    "PROVENANCES",
    "RUNTIME_CUTOFF_US",
    "TOP_KERNELS",
    "Distribution",
    "FamilyTime",
    "KernelBreakdown",
    "KernelTime",
    "LaunchOutlier",
    "LaunchStats",
    "ProvenanceTime",
    "StepKernels",
    "family_of_activities",
    "kernel_breakdown",
    "launch_stats",
    "provenance_of_activities",
    "provenance_of_name",
]

RUNTIME_CUTOFF_US = 50.0  # µs; HTA get_cuda_kernel_launch_stats runtime_cutoff default (a launch
# call longer than this is a runtime outlier; shorter ones with a shorter GPU op are short kernels)
LAUNCH_DELAY_CUTOFF_US = 100.0  # µs; HTA get_cuda_kernel_launch_stats launch_delay_cutoff default
TOP_KERNELS = 10  # kernels listed by total time; gpuprobe's choice (a screen's worth)
OUTLIERS_SHOWN = 5  # outliers of each kind named, worst first; gpuprobe's choice

# Families in the order they are reported; the patterns are tried in CLASSIFY_ORDER.
FAMILIES: tuple[str, ...] = (
    "GEMM",
    "convolution",
    "attention",
    "elementwise",
    "reduction",
    "communication",
    "memcpy/memset",
    "other",
)
_F = {name: i for i, name in enumerate(FAMILIES)}
_CLASSIFY_ORDER: tuple[tuple[P.NamePattern, str], ...] = (
    (P.COMM_KERNEL, "communication"),
    (P.MEMORY_KERNEL, "memcpy/memset"),
    (P.ATTENTION_KERNEL, "attention"),
    (P.CONV_KERNEL, "convolution"),
    (P.GEMM_FAMILY_KERNEL, "GEMM"),
    (P.REDUCTION_KERNEL, "reduction"),
    (P.ELEMENTWISE_KERNEL, "elementwise"),
)
FAMILY_COMM = _F["communication"]
FAMILY_MEMORY = _F["memcpy/memset"]


def _first_match(order: tuple[tuple[P.NamePattern, str], ...], name: str, default: str) -> str:
    """The label of the first pattern of ``order`` that ``name`` matches (``default`` none)."""
    return next((label for pattern, label in order if pattern.matches(name)), default)


def _by_name(ctx: TraceContext, label_of: Callable[[str], int], default: int) -> np.ndarray:
    """``label_of`` each distinct GPU activity name once, spread over the activities."""
    used = np.unique(ctx.gpu_name)
    table = np.full(int(used.max()) + 1, default, dtype=np.int8)
    for i in used.tolist():
        table[i] = label_of(ctx.names[i])
    return table[ctx.gpu_name]


def _memo(ctx: TraceContext, key: str, make: Callable[[], np.ndarray]) -> np.ndarray:
    """``make()`` once per trace context (read-only: every rule shares it); a context made
    again over other steps starts afresh, its columns being the same."""
    got = ctx.__dict__.get(key)
    if got is None or got.shape != ctx.gpu_name.shape:
        got = make()
        got.flags.writeable = False
        ctx.__dict__[key] = got
    return got


def family_of_name(name: str) -> str:
    """The family of a kernel name (``"other"`` when no pattern matches)."""
    return _first_match(_CLASSIFY_ORDER, name, "other")


def family_of_activities(ctx: TraceContext) -> np.ndarray:
    """Family index (into :data:`FAMILIES`) of every GPU activity of ``ctx``: memcpy and memset
    activities by their kind, kernels by their name."""
    if ctx.gpu_name.size == 0:
        return np.zeros(0, dtype=np.int8)
    return _memo(
        ctx,
        "_families",
        lambda: np.where(
            ctx.gpu_kind == GPU_KIND_KERNEL,
            _by_name(ctx, lambda n: _F[family_of_name(n)], _F["other"]),
            FAMILY_MEMORY,
        ).astype(np.int8),
    )


# Where a kernel's code comes from, in the order reported: a vendor or third-party library
# (cuBLAS, cuDNN, CUTLASS, rocBLAS, FBGEMM, ...), the framework itself (PyTorch's ATen kernels),
# a compiler (Triton kernels of torch.compile, XLA fusions), a collective (NCCL/RCCL), or the
# user's own code (a custom CUDA extension, a CuPy RawKernel, a Numba kernel: anything the named
# patterns do not know). What can change a kernel depends on it: autocast and TF32 reach the
# library and framework kernels PyTorch calls, not a kernel of one's own.
PROVENANCES: tuple[str, ...] = ("library", "framework", "compiler", "collective", "own")
PROVENANCE_OWN = PROVENANCES.index("own")
PROVENANCE_COMPILER = PROVENANCES.index("compiler")
_PROVENANCE_ORDER: tuple[tuple[P.NamePattern, str], ...] = (
    (P.COMM_KERNEL, "collective"),
    (P.COMPILER_KERNEL, "compiler"),
    (P.FRAMEWORK_KERNEL, "framework"),
    (P.LIBRARY_KERNEL, "library"),
    (P.FRAMEWORK_ANYWHERE, "framework"),
)


def provenance_of_name(name: str) -> str:
    """Where the kernel ``name`` comes from: one of :data:`PROVENANCES` (``"own"`` when no named
    pattern knows it)."""
    return _first_match(_PROVENANCE_ORDER, name, "own")


def provenance_of_activities(ctx: TraceContext) -> np.ndarray:
    """Provenance index (into :data:`PROVENANCES`) of every GPU activity of ``ctx``; -1 for the
    memcpy and memset activities, which are not kernels."""
    if ctx.gpu_name.size == 0:
        return np.zeros(0, dtype=np.int8)
    return _memo(
        ctx,
        "_provenances",
        lambda: np.where(
            ctx.gpu_kind == GPU_KIND_KERNEL,
            _by_name(ctx, lambda n: PROVENANCES.index(provenance_of_name(n)), PROVENANCE_OWN),
            -1,
        ).astype(np.int8),
    )


@dataclass(frozen=True)
class ProvenanceTime(Record):
    """Kernel time of one provenance: summed durations (µs), kernels, share of all kernel time
    (copies and fills are not kernels), and its kernel with the most time."""

    provenance: str
    count: int
    total_us: float
    share: float
    top: str = ""


@dataclass(frozen=True)
class FamilyTime(Record):
    """GPU time of one kernel family: summed durations (µs), count, share of all GPU time."""

    family: str
    count: int
    total_us: float
    share: float


@dataclass(frozen=True)
class KernelTime(Record):
    """One kernel name's GPU time over the selected steps (µs)."""

    name: str
    family: str
    count: int
    total_us: float
    mean_us: float
    max_us: float
    share: float
    provenance: str = ""


@dataclass(frozen=True)
class StepKernels(Record):
    """Kernel families of one step on one device."""

    step: int | None
    device: int
    total_us: float
    families: tuple[FamilyTime, ...]

    @property
    def label(self) -> str:
        """``"#N"`` or ``"trace"``."""
        return "trace" if self.step is None else f"#{self.step}"


@dataclass(frozen=True)
class Distribution(Record):
    """Summary of a sample (µs); None where the sample is empty."""

    n: int
    mean: float | None = None
    median: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, values: np.ndarray) -> Distribution:
        """The distribution of ``values`` (linear-interpolated percentiles, NumPy's default)."""
        if values.size == 0:
            return cls(n=0)
        p50, p90, p99 = np.percentile(values, [50, 90, 99]).tolist()
        return cls(
            n=int(values.size),
            mean=float(values.mean()),
            median=float(p50),
            p90=float(p90),
            p99=float(p99),
            max=float(values.max()),
        )


@dataclass(frozen=True)
class LaunchOutlier(Record):
    """One launch beyond a cut-off: which kernel, in which step, by how much (µs). For a graph
    replay, ``kernel`` is its first kernel and ``graph_kernels`` the number it ran."""

    kind: str  # "runtime" (the launch call is long) or "launch-delay" (the GPU started late)
    kernel: str
    call: str
    step: int | None
    value_us: float
    graph_kernels: int = 0


@dataclass(frozen=True)
class LaunchStats(Record):
    """HTA's ``get_cuda_kernel_launch_stats`` over the selected steps, with named outliers.

    One row per launch call (kernel launches, async copies and sets, graph replays) joined by
    correlation id to what it put on the GPU: ``cpu`` the call's duration, ``gpu`` the span of
    its GPU work, ``delay`` = GPU start − (call start + call duration), clipped at 0.
    """

    launches: int = 0
    graph_launches: int = 0
    gpu_activities: int = 0
    cpu_us: Distribution = Distribution(n=0)
    gpu_us: Distribution = Distribution(n=0)
    delay_us: Distribution = Distribution(n=0)
    short_kernels: int = 0
    runtime_outliers: int = 0
    launch_delay_outliers: int = 0
    outliers: tuple[LaunchOutlier, ...] = ()
    runtime_cutoff_us: float = RUNTIME_CUTOFF_US
    launch_delay_cutoff_us: float = LAUNCH_DELAY_CUTOFF_US


@dataclass(frozen=True)
class KernelBreakdown(Record):
    """Kernel families and top kernels of one trace (all devices together, then per step)."""

    path: str
    total_us: float
    families: tuple[FamilyTime, ...]
    top: tuple[KernelTime, ...]
    steps: tuple[StepKernels, ...]
    launches: LaunchStats | None = None
    rank: int | None = None
    provenances: tuple[ProvenanceTime, ...] = ()

    def family(self, name: str) -> FamilyTime | None:
        """The :class:`FamilyTime` of family ``name``, or None."""
        return next((f for f in self.families if f.family == name), None)

    def provenance(self, name: str) -> ProvenanceTime | None:
        """The :class:`ProvenanceTime` of provenance ``name`` (one of :data:`PROVENANCES`), or
        None when no kernel has it."""
        return next((p for p in self.provenances if p.provenance == name), None)

    def __repr__(self) -> str:
        return render.repr_(self)

    def __str__(self) -> str:
        return render.text(self)

    def _repr_html_(self) -> str:
        return render.html(self)


def _families(fam: np.ndarray, dur: np.ndarray) -> tuple[FamilyTime, ...]:
    n = len(FAMILIES)
    counts = np.bincount(fam, minlength=n) if fam.size else np.zeros(n, dtype=np.int64)
    totals = np.bincount(fam, weights=dur, minlength=n) if fam.size else np.zeros(n)
    whole = float(totals.sum())
    return tuple(
        FamilyTime(
            family=FAMILIES[i],
            count=int(counts[i]),
            total_us=float(totals[i]),
            share=float(totals[i] / whole) if whole > 0 else 0.0,
        )
        for i in range(n)
        if counts[i]
    )


def _provenances(
    prov: np.ndarray, dur: np.ndarray, names: np.ndarray, all_names: list[str]
) -> tuple[ProvenanceTime, ...]:
    kern = prov >= 0
    whole = float(dur[kern].sum())
    out = []
    for i, provenance in enumerate(PROVENANCES):
        m = prov == i
        if not m.any():
            continue
        uniq, inv = np.unique(names[m], return_inverse=True)
        totals = np.bincount(inv, weights=dur[m])
        total = float(dur[m].sum())
        out.append(
            ProvenanceTime(
                provenance=provenance,
                count=int(m.sum()),
                total_us=total,
                share=total / whole if whole > 0 else 0.0,
                top=all_names[int(uniq[int(np.argmax(totals))])],
            )
        )
    return tuple(out)


def kernel_breakdown(
    ctx: TraceContext,
    *,
    top: int = TOP_KERNELS,
    rank: int | None = None,
    launches: bool = True,
) -> KernelBreakdown:
    """Time by kernel family and the ``top`` kernels of ``ctx``'s selected steps (µs)."""
    sel = ctx.gpu_step >= 0
    fam_all = family_of_activities(ctx)
    fam, dur = fam_all[sel], ctx.gpu_dur[sel]
    prov = provenance_of_activities(ctx)[sel]
    names, step, dev = ctx.gpu_name[sel], ctx.gpu_step[sel], ctx.gpu_dev[sel]
    whole = float(dur.sum())
    tops: list[KernelTime] = []
    if names.size:
        uniq, first, inv = np.unique(names, return_index=True, return_inverse=True)
        counts = np.bincount(inv)
        totals = np.bincount(inv, weights=dur)
        maxes = np.zeros(uniq.size)
        np.maximum.at(maxes, inv, dur)
        for j in np.argsort(-totals, kind="stable")[:top].tolist():
            tops.append(
                KernelTime(
                    name=ctx.names[int(uniq[j])],
                    family=FAMILIES[int(fam[first[j]])],
                    count=int(counts[j]),
                    total_us=float(totals[j]),
                    mean_us=float(totals[j] / counts[j]),
                    max_us=float(maxes[j]),
                    share=float(totals[j] / whole) if whole > 0 else 0.0,
                    provenance=PROVENANCES[int(prov[first[j]])] if prov[first[j]] >= 0 else "",
                )
            )
    steps: list[StepKernels] = []
    for i, st in enumerate(ctx.steps):
        in_step = step == i
        for d in ctx.devices:
            m = in_step & (dev == d)
            if not m.any():
                continue
            steps.append(
                StepKernels(
                    step=st.number,
                    device=int(d),
                    total_us=float(dur[m].sum()),
                    families=_families(fam[m], dur[m]),
                )
            )
    return KernelBreakdown(
        path=ctx.raw.path,
        total_us=whole,
        families=_families(fam, dur),
        top=tuple(tops),
        steps=tuple(steps),
        launches=launch_stats(ctx) if launches else None,
        rank=rank,
        provenances=_provenances(prov, dur, names, ctx.names),
    )


def launch_stats(
    ctx: TraceContext,
    *,
    runtime_cutoff_us: float = RUNTIME_CUTOFF_US,
    launch_delay_cutoff_us: float = LAUNCH_DELAY_CUTOFF_US,
) -> LaunchStats:
    """HTA's kernel launch statistics over ``ctx``'s selected steps (see :class:`LaunchStats`)."""
    launch_ids = P.LAUNCH_CALL.ids(ctx.names)
    graph_ids = P.GRAPH_LAUNCH.ids(ctx.names)
    rt = ctx.gpu_rt
    ok = rt >= 0
    ok[ok] = np.isin(ctx.rt_name[rt[ok]], launch_ids)
    ok &= ctx.gpu_step >= 0
    idx = np.nonzero(ok)[0]
    if idx.size == 0:
        return LaunchStats(
            runtime_cutoff_us=runtime_cutoff_us, launch_delay_cutoff_us=launch_delay_cutoff_us
        )
    # one row per launch call: its GPU work's first start, last end and first activity
    order = idx[np.lexsort((ctx.gpu_ts[idx], rt[idx]))]
    calls = rt[order]
    cuts = np.flatnonzero(np.diff(calls)) + 1
    starts = np.concatenate([[0], cuts])
    call = calls[starts]
    first_act = order[starts]
    gpu_start = ctx.gpu_ts[first_act]
    gpu_end = np.maximum.reduceat(ctx.gpu_end[order], starts)
    per_call = np.diff(np.concatenate([starts, [order.size]]))
    cpu = ctx.rt_dur[call]
    gpu = gpu_end - gpu_start
    delay = np.maximum(gpu_start - (ctx.rt_ts[call] + cpu), 0.0)
    is_graph = np.isin(ctx.rt_name[call], graph_ids)
    short = (cpu <= runtime_cutoff_us) & (gpu < cpu)
    rt_out = cpu > runtime_cutoff_us
    delay_out = delay > launch_delay_cutoff_us
    step_no = ctx.gpu_step[first_act]

    outliers: list[LaunchOutlier] = []
    for kind, mask, value in (("runtime", rt_out, cpu), ("launch-delay", delay_out, delay)):
        sel = np.nonzero(mask)[0]
        for j in sel[np.argsort(-value[sel], kind="stable")][:OUTLIERS_SHOWN].tolist():
            s = int(step_no[j])
            outliers.append(
                LaunchOutlier(
                    kind=kind,
                    kernel=ctx.names[int(ctx.gpu_name[first_act[j]])],
                    call=ctx.names[int(ctx.rt_name[call[j]])],
                    step=ctx.steps[s].number if s >= 0 else None,
                    value_us=float(value[j]),
                    graph_kernels=int(per_call[j]) if is_graph[j] else 0,
                )
            )
    return LaunchStats(
        launches=int(call.size),
        graph_launches=int(is_graph.sum()),
        gpu_activities=int(order.size),
        cpu_us=Distribution.of(cpu),
        gpu_us=Distribution.of(gpu),
        delay_us=Distribution.of(delay),
        short_kernels=int(short.sum()),
        runtime_outliers=int(rt_out.sum()),
        launch_delay_outliers=int(delay_out.sum()),
        outliers=tuple(outliers),
        runtime_cutoff_us=runtime_cutoff_us,
        launch_delay_cutoff_us=launch_delay_cutoff_us,
    )
