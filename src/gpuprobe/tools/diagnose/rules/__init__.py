"""The rules: one module per family, each a rule object (:func:`gpuprobe.core.rules.rule`) made
from a function ``(TraceContext) -> list[Finding]``, declaring the finding id it emits.

Each rule's thresholds are module-level constants with their unit and source. A rule that cannot
judge this trace (no GPU events, no DataLoader, no stack) says so with a ``skipped`` finding
rather than staying silent.
"""

from __future__ import annotations

from gpuprobe.core.findings import Finding, Status
from gpuprobe.core.rules import Rule, apply_rules
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.rules import (
    comm,
    compiled,
    copies,
    gpu_time,
    host,
    input,
    loops,
    memory,
    precision,
    startup,
    sync,
    unused,
    window,
)
from gpuprobe.tools.diagnose.rules._common import as_information
from gpuprobe.tools.diagnose.rules.gains import price_findings

__all__ = ["MIN_WARN_GAIN", "RULES", "run_rules"]

RULES: tuple[Rule, ...] = (
    gpu_time.gpu_idle,
    unused.gpu_unused,
    startup.one_time_start,
    window.unsteady_window,
    gpu_time.launch_bound,
    host.host_work,
    host.untraced_host,
    input.input_bound,
    sync.synchronisation,
    copies.pageable_copies,
    copies.contiguous_copies,
    loops.python_loops,
    precision.tensor_cores,
    comm.single_rank_communication,
    compiled.compiled_regions,
    memory.peak_memory,
)


MIN_WARN_GAIN = 0.01  # of the analysed time: a warning whose own estimate of what its fix would
# gain is under this is information (a real effect, not worth the user's time first); ours
STEADY_STATE = ("gpu-idle", "launch-bound", "host-work", "untraced-host", "input-bound")
# the verdicts on the steady state: on a cold first pass (TraceContext.cold) they are information


def run_rules(ctx: TraceContext) -> list[Finding]:
    """Every rule's findings, in rule order (sort with ``worst_first`` to show), each priced
    cause's gain from the what-if replay (:mod:`.gains`). On a cold
    first pass the steady-state warnings become information: what remains after the one-time
    start-up is still a first pass (first calls of every op, TorchScript and compiled code)."""
    out = as_information(
        price_findings(ctx, apply_rules(RULES, ctx)),
        f"fixing it would gain under {100 * MIN_WARN_GAIN:.0f} % of the time (the replay of "
        "the step's dependency graph with its cause changed: it is not on the critical path)",
        lambda f: f.gain is not None and f.gain < MIN_WARN_GAIN,
    )
    if any(f.id == "one-time-start" and f.status is Status.WARN for f in out):
        # a first pass's collectives set up NCCL's connections and wait for the other ranks'
        # start-up (the folder rule's cold-ranks says the same of a job)
        out = as_information(
            out,
            "this trace is largely one-time start-up (see one-time-start): its collectives "
            "wait for the other ranks' start-up and set up NCCL's connections; profile after "
            "warm-up to judge the communication",
            lambda f: f.id == "exposed-communication",
        )
    if not ctx.cold:
        return out
    note = (
        "this profile is a cold first pass (see one-time-start): judged on what remains after "
        "the one-time calls, but the steady state may differ; profile after warm-up to be sure"
    )
    return as_information(out, note, lambda f: f.id in STEADY_STATE)
