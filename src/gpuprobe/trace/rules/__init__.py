"""The rules: one module per family, each a function ``(TraceContext) -> list[Finding]``.

Each rule's thresholds are module-level constants with their unit and source. A rule that cannot
judge this trace (no GPU events, no DataLoader, no stack) says so with a ``skipped`` finding
rather than staying silent.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuprobe.findings import Finding, apply_rules
from gpuprobe.trace.analysis import TraceContext
from gpuprobe.trace.rules import copies, gpu_time, input, loops, memory, precision, sync

__all__ = ["RULES", "run_rules"]

Rule = Callable[[TraceContext], list[Finding]]

RULES: tuple[Rule, ...] = (
    gpu_time.gpu_idle,
    gpu_time.launch_bound,
    input.input_bound,
    sync.synchronisation,
    copies.pageable_copies,
    copies.contiguous_copies,
    loops.python_loops,
    precision.tensor_cores,
    memory.peak_memory,
)


def run_rules(ctx: TraceContext) -> list[Finding]:
    """Every rule's findings, in rule order (sort with ``worst_first`` to show)."""
    return apply_rules(RULES, ctx)
