"""Read a PyTorch profiler (Kineto) trace and say why the GPU waits, with the evidence and the fix.

::

    import gpuprobe
    d = gpuprobe.diagnose("trace.json.gz")          # a Diagnosis
    print(d)                                         # findings worst first, then the steps
    d.to_dict()                                      # what `gpuprobe diagnose --json` prints

    with gpuprobe.profile() as prof:                 # torch.profiler with a schedule, then this
        for batch in loader:
            step(batch)
            prof.step()

The stages: :mod:`.kineto` streams the file into compact columns, :mod:`.analysis` computes the
per-step breakdown, :mod:`.rules` judge it; :mod:`gpuprobe.tools.diagnose.show.text`,
:mod:`~gpuprobe.tools.diagnose.show.ranks` and :mod:`~gpuprobe.tools.diagnose.show.html` show it.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any

from gpuprobe.tools.diagnose.kineto import ProgressCallback
from gpuprobe.tools.diagnose.model import Diagnosis, StepBreakdown, TraceComparison, TraceSummary

__all__ = [
    "ANALYSIS_MIB_PER_MILLION_EVENTS",
    "Diagnosis",
    "StepBreakdown",
    "TraceComparison",
    "TraceSummary",
    "compare",
    "diagnose",
    "diagnose_with_context",
]


# MiB the analysis takes per million events on top of the reader's columns: the whole diagnosis
# measured 205-230 MiB per million events and the reader 46-57 of it (docs/diagnose.md, Numbers:
# a 605 MB trace and the 28 M-kernel expansion), rounded up.
ANALYSIS_MIB_PER_MILLION_EVENTS = 190


def check_memory(events: int, path: str | os.PathLike[str]) -> None:
    """An :class:`InputError` when analysing ``events`` events would need more memory than this
    machine has free: said before the analysis starts, not by the kernel's OOM killer after."""
    from gpuprobe.core.errors import InputError
    from gpuprobe.platform.hardware.host import available_memory

    need = events / 1e6 * ANALYSIS_MIB_PER_MILLION_EVENTS * 2**20
    free = available_memory()
    if free is None or need <= free:
        return
    raise InputError(
        f"{path}: {events:,} events; analysing them needs about {need / 2**30:.1f} GiB "
        f"({ANALYSIS_MIB_PER_MILLION_EVENTS} MiB per million events) and this machine has "
        f"{free / 2**30:.1f} GiB free: run it on a machine with more memory, or record fewer "
        "steps (torch.profiler.schedule(active=N) with a smaller N)"
    )


def out_of_memory(path: str | os.PathLike[str], events: int) -> Exception:
    """The one-line error for a trace that ran this process out of memory: ``MemoryError``
    from NumPy or the reader, under a memory cap (``ulimit -v``, a container's limit) that the
    free-memory check before the analysis cannot see."""
    from gpuprobe.core.errors import InputError

    need = events / 1e6 * ANALYSIS_MIB_PER_MILLION_EVENTS
    return InputError(
        f"{path}: ran out of memory analysing {events:,} events (about {need:,.0f} MiB needed, "
        f"{ANALYSIS_MIB_PER_MILLION_EVENTS} MiB per million events): a memory limit holds this "
        "process (ulimit -v, a container's cap) or the machine is short of it; run it with more "
        "memory, or record fewer steps (torch.profiler.schedule(active=N) with a smaller N)"
    )


def diagnose_with_context(
    path: str | os.PathLike[str],
    *,
    steps: str | tuple[int, int] | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[Diagnosis, Any]:
    """Like :func:`diagnose`, also returning the :class:`~.analysis.TraceContext` (for --html)."""
    from gpuprobe.core.findings import worst_first
    from gpuprobe.tools.diagnose.analysis import TraceContext
    from gpuprobe.tools.diagnose.kineto import read_trace
    from gpuprobe.tools.diagnose.rules import run_rules
    from gpuprobe.tools.diagnose.steps import parse_step_range

    wanted = parse_step_range(steps) if isinstance(steps, str) else steps
    t0 = time.perf_counter()
    raw = read_trace(path, progress=progress)
    check_memory(raw.events, path)
    t1 = time.perf_counter()
    try:
        ctx = TraceContext(raw, wanted)
        findings = worst_first(run_rules(ctx))
        t2 = time.perf_counter()
        diag = Diagnosis(
            summary=ctx.summary(read_seconds=t1 - t0, analyse_seconds=t2 - t1),
            steps=tuple(ctx.breakdowns),
            findings=tuple(findings),
            cold=ctx.cold,
            whatif=ctx.whatif.fixes(),
        )
    except MemoryError:
        raise out_of_memory(path, raw.events) from None
    lead = diag.headline
    if lead is not None and diag.findings and diag.findings[0] is not lead:
        # the headline first, in text, HTML and JSON alike
        rest = tuple(f for f in diag.findings if f is not lead)
        diag = replace(diag, findings=(lead, *rest))
    return diag, ctx


def diagnose(
    path: str | os.PathLike[str],
    *,
    steps: str | tuple[int, int] | None = None,
    progress: ProgressCallback | None = None,
) -> Diagnosis:
    """Diagnose a Kineto trace file (``.json`` or ``.json.gz``).

    ``steps``: only these profiled steps, as ``"N..M"`` or an inclusive ``(N, M)``.
    Raises :class:`gpuprobe.core.errors.InputError` for a file that is not a readable trace.
    """
    return diagnose_with_context(path, steps=steps, progress=progress)[0]


def compare(
    before: str | os.PathLike[str] | Diagnosis,
    after: str | os.PathLike[str] | Diagnosis,
    *,
    steps: str | tuple[int, int] | None = None,
    contexts: tuple[Any, Any] | None = None,
) -> TraceComparison:
    """What changed between two traces (e.g. before and after a fix). A path is read here;
    for a :class:`Diagnosis`, ``contexts`` (its and the other's trace context, from
    :func:`diagnose_with_context`) add the shares of GPU time and the kernel diff."""
    from gpuprobe.tools.diagnose.compare import compare_diagnoses

    ctx_b, ctx_a = contexts if contexts is not None else (None, None)
    if isinstance(before, Diagnosis):
        b = before
    else:
        b, ctx_b = diagnose_with_context(before, steps=steps)
    if isinstance(after, Diagnosis):
        a = after
    else:
        a, ctx_a = diagnose_with_context(after, steps=steps)
    return compare_diagnoses(b, a, ctx_b, ctx_a)
