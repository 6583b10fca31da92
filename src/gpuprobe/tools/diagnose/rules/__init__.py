"""The rules: one module per family, each a rule object (:func:`gpuprobe.core.rules.rule`) made
from a function ``(TraceContext) -> list[Finding]``, declaring the finding id it emits.

Each rule's thresholds are module-level constants with their unit and source. A rule that cannot
judge this trace (no GPU events, no DataLoader, no stack) says so with a ``skipped`` finding
rather than staying silent.
"""

from __future__ import annotations

from gpuprobe.core.findings import Finding
from gpuprobe.core.rules import Rule, apply_rules
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.rules import (
    compiled,
    copies,
    gpu_time,
    input,
    loops,
    memory,
    precision,
    sync,
)

__all__ = ["RULES", "run_rules"]

RULES: tuple[Rule, ...] = (
    gpu_time.gpu_idle,
    gpu_time.launch_bound,
    input.input_bound,
    sync.synchronisation,
    copies.pageable_copies,
    copies.contiguous_copies,
    loops.python_loops,
    precision.tensor_cores,
    compiled.compiled_regions,
    memory.peak_memory,
)


def run_rules(ctx: TraceContext) -> list[Finding]:
    """Every rule's findings, in rule order (sort with ``worst_first`` to show)."""
    return apply_rules(RULES, ctx)
