"""One process's successive profiler cycles: which are warm-up, which are steady, and the
diagnosis of the steady one; and :func:`diagnose_folder`, which reads a folder of traces and
says whether it holds a job's ranks or a process's cycles before judging it.

``torch.profiler.profile(schedule=schedule(wait, warmup, active, repeat=N),
on_trace_ready=tensorboard_trace_handler(dir))`` writes one file per cycle, all from the same
process, one after the other in time. The first cycles of a run are often unlike the rest:
cuDNN autotuning, lazy module loading inside a first launch, the caching allocator growing,
cold file caches. Each cycle is compared with the **reference**, the median over every cycle but
the first (the one most often cold; a median, so one odd cycle among the later ones does not move
it): a cycle is *steady* when its median step and its GPU busy share are within
:data:`STEADY_STEP_TOLERANCE` and :data:`STEADY_BUSY_TOLERANCE` of the reference, and the first
cycle is also *warm-up* when it holds a one-time cost, a runtime call at least
:data:`ONE_TIME_CALL_FACTOR` times longer than the longest of the later cycles (and at least
:data:`ONE_TIME_CALL_MIN_US`). A cycle off before the first steady one is *warm-up*, after it
*unsteady*. The last steady cycle is read again and diagnosed in full
(:func:`gpuprobe.tools.diagnose.engine.diagnose`).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from typing import Any

from gpuprobe.core.errors import InputError
from gpuprobe.tools.diagnose.cycles_model import CycleDiagnosis, CycleRow, Phase
from gpuprobe.tools.diagnose.kineto import ProgressCallback
from gpuprobe.tools.diagnose.layout import classify
from gpuprobe.tools.diagnose.ranks import (
    TracePart,
    find_trace_files,
    folder_name,
    ranks_result,
    read_traces,
)
from gpuprobe.tools.diagnose.ranks_model import MultiRankDiagnosis

__all__ = [
    "ONE_TIME_CALL_FACTOR",
    "ONE_TIME_CALL_MIN_US",
    "STEADY_BUSY_TOLERANCE",
    "STEADY_STEP_TOLERANCE",
    "cycles_result",
    "diagnose_cycles",
    "diagnose_folder",
]

# relative; a cycle whose median step differs from the reference by more than this is not
# steady: torch.utils.benchmark's Timer.adaptive_autorange(threshold=0.1) takes timings as
# settled once their spread (IQR / median) is under 10 %.
STEADY_STEP_TOLERANCE = 0.10
# of step time (10 percentage points); the same 10 % bound on the share of the step the GPU is
# busy: a cycle with the same step time but a GPU busy share this far off ran other work.
STEADY_BUSY_TOLERANCE = 0.10
# ×; a first cycle whose longest runtime call (not a sync) is an order of magnitude longer than
# any of the later cycles' paid a one-time cost (a module loaded inside the first launch: CUDA
# lazy loading, CUDA C++ Programming Guide "Lazy Loading"; cuDNN/cuBLAS handle creation).
ONE_TIME_CALL_FACTOR = 10.0
# µs; and at least 1 ms: a kernel launch takes about 5-20 µs (the median launch in the V100
# traces of ../shared/traces is 8-12 µs), so a 1 ms call did something besides queueing work.
ONE_TIME_CALL_MIN_US = 1_000.0


_REF = "the median of every cycle but the first"


def _reference(values: list[float | None]) -> float | None:
    """The median over every cycle but the first (the second alone for two), of known values."""
    later = [v for v in values[1:] if v is not None]
    return statistics.median(later) if later else None


def _busy(p: TracePart) -> tuple[float, float | None]:
    """(GPU time of the steps summed over devices, busy share of it)."""
    r = p.row
    total = r.gpu_busy_in_steps_us + r.gpu_idle_in_steps_us
    return total, (r.gpu_busy_in_steps_us / total if total > 0 else None)


def _fmt_us(x: float) -> str:
    return f"{x:,.0f} µs"


def _judge(
    parts: Sequence[TracePart],
) -> tuple[list[tuple[Phase, str]], float | None, float | None]:
    """Each cycle's phase and why, and the reference median step and busy share."""
    steps = [p.row.step_median_us for p in parts]
    busy = [_busy(p)[1] for p in parts]
    ref_step, ref_busy = _reference(steps), _reference(busy)
    later_calls = [p.facts.longest_call_us or 0.0 for p in parts[1:]]
    out: list[tuple[Phase, str]] = []
    settled = False
    for i, p in enumerate(parts):
        why: list[str] = []
        s, b = steps[i], busy[i]
        if s is not None and ref_step:
            dev = s / ref_step - 1.0
            if abs(dev) > STEADY_STEP_TOLERANCE:
                side = "above" if dev > 0 else "below"
                how = (
                    f"{s / ref_step:,.1f}× the reference"
                    if dev >= 1.0
                    else f"{100 * abs(dev):.1f} % {side} the reference"
                )
                why.append(f"median step {_fmt_us(s)}, {how} ({_fmt_us(ref_step)}: {_REF})")
        if b is not None and ref_busy is not None and abs(b - ref_busy) > STEADY_BUSY_TOLERANCE:
            why.append(
                f"GPU busy {100 * b:.1f} % of its steps against the reference's "
                f"{100 * ref_busy:.1f} %"
            )
        call = p.facts.longest_call_us
        if i == 0 and later_calls and call is not None:
            most = max(later_calls)
            if call >= ONE_TIME_CALL_MIN_US and call >= ONE_TIME_CALL_FACTOR * most:
                why.append(
                    f"a one-time {_fmt_us(call)} {p.facts.longest_call} (the later cycles' "
                    f"longest call: {_fmt_us(most)})"
                )
        if why:
            out.append(("unsteady" if settled else "warm-up", "; ".join(why)))
        else:
            settled = True
            near = []
            if s is not None and ref_step:
                near.append(
                    f"median step {_fmt_us(s)}, within {100 * STEADY_STEP_TOLERANCE:.0f} % of "
                    f"the reference's {_fmt_us(ref_step)} ({_REF})"
                )
            if b is not None and ref_busy is not None:
                near.append(
                    f"GPU busy {100 * b:.1f} %, within {100 * STEADY_BUSY_TOLERANCE:.0f} points"
                )
            out.append(("steady", "; ".join(near) or "nothing to compare (no steps, no GPU)"))
    return out, ref_step, ref_busy


def cycles_result(
    parts: Sequence[TracePart], t0: float, steps: tuple[int, int] | None = None
) -> CycleDiagnosis:
    """The verdict on ``parts``, one process's cycles in time order (``t0``: when reading
    began): each cycle's row, and the last steady cycle read again and diagnosed in full."""
    from gpuprobe.tools.diagnose.engine import diagnose

    judged, ref_step, ref_busy = _judge(parts)
    rows = []
    for i, (p, (phase, why)) in enumerate(zip(parts, judged, strict=True)):
        r, ident, facts = p.row, p.identity, p.facts
        total, share = _busy(p)
        prev = parts[i - 1].identity.end_us if i else None
        rows.append(
            CycleRow(
                cycle=i + 1,
                path=r.path,
                phase=phase,
                why=why,
                pid=ident.pid,
                host=ident.host,
                rank=ident.rank,
                start_us=ident.start_us,
                end_us=ident.end_us,
                steps=r.steps,
                first_step=facts.first_step,
                last_step=facts.last_step,
                step_median_us=r.step_median_us,
                step_total_us=r.step_total_us,
                gpu_step_time_us=total,
                gpu_busy_us=r.gpu_busy_in_steps_us,
                gpu_busy_fraction=share,
                idle_cause_us=dict(facts.idle_cause_us),
                longest_call_us=facts.longest_call_us,
                longest_call=facts.longest_call,
                gap_before_us=ident.start_us - prev
                if prev is not None and ident.start_us is not None
                else None,
            )
        )
    steady = [r for r in rows if r.phase == "steady"]
    note = ""
    if steady and len(rows) == 2:
        chosen = steady[-1]
        note = (
            "with two cycles the second is checked against nothing but itself: it may still be "
            "warm-up (a first TorchScript or compiled call, autotuning); profile three cycles or "
            "more (schedule(..., repeat=3)) to tell"
        )
    elif steady:
        chosen = steady[-1]
    else:
        chosen = rows[-1]
        note = (
            f"no cycle is within {100 * STEADY_STEP_TOLERANCE:.0f} % of the later cycles: "
            "the last one is diagnosed; profile more cycles, after warm-up"
        )
    diag = diagnose(chosen.path, steps=steps)
    return CycleDiagnosis(
        process=parts[0].identity.label,
        cycles=tuple(rows),
        diagnosed=chosen.cycle,
        diagnosis=diag,
        reference_step_us=ref_step,
        reference_busy=ref_busy,
        note=note,
        seconds=time.perf_counter() - t0,
    )


def _read(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    steps: str | tuple[int, int] | None,
    progress: ProgressCallback | None,
) -> tuple[list[TracePart], tuple[int, int] | None, str]:
    from gpuprobe.tools.diagnose.steps import parse_step_range

    wanted = parse_step_range(steps) if isinstance(steps, str) else steps
    files = find_trace_files(paths)
    return read_traces(files, wanted, progress), wanted, folder_name(paths)


def diagnose_cycles(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    steps: str | tuple[int, int] | None = None,
    progress: ProgressCallback | None = None,
) -> CycleDiagnosis:
    """Diagnose one process's successive profiler cycles (a folder, or its files): each
    cycle's busy share and idle split, which are warm-up and which steady, and the full
    diagnosis of the last steady one. Files are read one at a time. Raises
    :class:`~gpuprobe.core.errors.InputError` (one line) when the traces are not one process's
    cycles (a job's ranks, or a mix), or a path is missing or not a trace."""
    t0 = time.perf_counter()
    parts, wanted, where = _read(paths, steps, progress)
    layout = classify([p.identity for p in parts], where)
    if layout.kind != "cycles":
        what = "one trace" if len(parts) == 1 else f"the traces of {len(layout.indices)} ranks"
        raise InputError(
            f"{where}: {what}, not one process's successive cycles: use gpuprobe.diagnose() "
            "for one trace, gpuprobe.diagnose_ranks() for ranks"
        )
    return cycles_result([parts[i] for i in layout.indices], t0, wanted)


def diagnose_folder(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    steps: str | tuple[int, int] | None = None,
    progress: ProgressCallback | None = None,
    jobs: int | None = None,
    cluster: Any = None,
    worker_glob: str | None = None,
    connect_timeout: float | None = None,
    rank_timeout: float | None = None,
) -> MultiRankDiagnosis | CycleDiagnosis:
    """A folder of traces (or several files), checked before it is judged: the ranks of one job
    give a :class:`~gpuprobe.tools.diagnose.ranks_model.MultiRankDiagnosis`, one process's
    successive profiler cycles a :class:`CycleDiagnosis`, a job's ranks over several cycles the
    ranks of the last cycle (saying so). Anything else raises a one-line
    :class:`~gpuprobe.core.errors.InputError` saying what was found and what to pass.

    The files are read as :func:`~gpuprobe.tools.diagnose.ranks.diagnose_ranks` reads them
    (``jobs`` local reader processes, or the workers of ``cluster``); a rank that cannot be read
    is named and left out, a cycle that cannot be read is an InputError."""
    from gpuprobe.tools.diagnose.ranks import Reading, whole_job
    from gpuprobe.tools.diagnose.steps import parse_step_range

    t0 = time.perf_counter()
    wanted = parse_step_range(steps) if isinstance(steps, str) else steps
    reading = Reading(whole_job=whole_job(paths, cluster))
    if cluster is not None:
        from gpuprobe.tools.diagnose.ranks import diagnose_ranks

        return diagnose_ranks(
            paths, steps=wanted, progress=progress, cluster=cluster, worker_glob=worker_glob,
            connect_timeout=connect_timeout, rank_timeout=rank_timeout,
        )  # fmt: skip
    if worker_glob is not None:
        from gpuprobe.core.errors import UsageError

        raise UsageError("--worker-glob is for a Dask cluster: give --cluster ADDRESS with it")
    files = find_trace_files(paths)
    parts = read_traces(files, wanted, progress, jobs=jobs, reading=reading)
    where = folder_name(paths)
    if not parts:
        from gpuprobe.tools.diagnose.ranks import judge_parts

        return judge_parts(parts, where, t0, reading)  # raises: none could be read
    layout = classify([p.identity for p in parts], where)
    chosen = [parts[i] for i in layout.indices]
    if layout.kind == "cycles":
        if reading.unread:
            u = reading.unread[0]
            raise InputError(f"{u.path}: {u.why}")
        return cycles_result(chosen, t0, wanted)
    return ranks_result(chosen, t0, note=layout.note, reading=reading)
