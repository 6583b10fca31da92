"""The rules that judge a recording: one module per family, each rule a rule object
(:func:`gpuprobe.core.rules.rule`) made from a function of the
:class:`~gpuprobe.tools.monitor.summary.RunContext` returning a list of findings, declaring the
finding ids it emits and when it applies.

- :mod:`.recording`: the recording itself (a lost GPU, no end line, damaged lines, the exit code,
  too few samples, the sampler's cost).
- :mod:`.leftovers`: processes the command left running when it exited.
- :mod:`.gpu`: whether a GPU was recorded and used, and how busy each used GPU was.
- :mod:`.starvation`: why a mostly idle GPU waited (the main thread, the workers, the host).
- :mod:`.memory`: GPU memory against capacity, the command's RSS growing, the host short of it.
- :mod:`.throttle`: clock event reasons while the GPU worked.
- :mod:`.host`: other processes' load, the command's cores, a pegged main thread.
- :mod:`.steps`: the steps of its PyTorch processes (the flight recorder): the rate, the slow
  ones, a drift.
- :mod:`.pack`: the findings of ``gpuprobe pack`` (its own ``RULES``, over a
  :class:`~gpuprobe.tools.monitor.pack.PackReport`).

Rules about one GPU take the GPU's statistics too, ``(RunContext, GpuStats)``, and are listed in
:data:`GPU_RULES`; :func:`each_used_gpu` runs them GPU by GPU, so that each GPU's findings stay
together (its ids are those of :data:`GPU_RULES`). Each rule's thresholds are module-level
constants with their unit and source. E-codes in the rules name the experiments in
``docs/experiments.md``.
"""

from __future__ import annotations

from gpuprobe.core.findings import Finding
from gpuprobe.core.rules import Rule, apply_rules, declared_ids, rule
from gpuprobe.tools.monitor.rules import (
    gpu,
    host,
    leftovers,
    memory,
    recording,
    starvation,
    steps,
    throttle,
)
from gpuprobe.tools.monitor.summary import RunContext

__all__ = ["GPU_RULES", "RULES", "each_used_gpu", "run_rules"]

GPU_RULES: tuple[Rule, ...] = (  # each over (RunContext, GpuStats)
    gpu.gpu_busy,
    gpu.gpu_shared,
    starvation.starved_by_main_thread,
    starvation.starved_by_loaders,
    starvation.starved_by_host,
    memory.gpu_memory,
    throttle.gpu_throttle,
)


@rule(*sorted(declared_ids(GPU_RULES)))
def each_used_gpu(ctx: RunContext) -> list[Finding]:
    """The :data:`GPU_RULES` on each GPU the command used, one GPU after the other."""
    return [f for st in ctx.used_gpus for f in apply_rules(GPU_RULES, ctx, st)]


RULES: tuple[Rule, ...] = (
    recording.lost_gpus,
    recording.incomplete,
    recording.damaged_lines,
    recording.exit_status,
    leftovers.leftover_processes,
    recording.too_short,
    gpu.gpu_presence,
    each_used_gpu,
    host.host_busy,
    host.cpu_usage,
    host.cpu_main_thread,
    steps.captures,
    steps.slow_steps,
    steps.step_drift,
    steps.step_summary,
    memory.host_memory_growing,
    memory.host_memory_low,
    recording.sampler_cost,
)


def run_rules(ctx: RunContext) -> list[Finding]:
    """Every rule's findings, in rule order (sort with ``worst_first`` to show)."""
    return apply_rules(RULES, ctx)
