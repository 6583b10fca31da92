"""Helpers shared by the rule modules: the findings' group, how a GPU is named in them, and when
a rule has enough of the recording to judge."""

from __future__ import annotations

from gpuprobe.tools.monitor.summary import GpuStats, RunContext

__all__ = ["GROUP", "enough_samples", "gpu_label", "gpu_subject"]

GROUP = "monitor"


def enough_samples(ctx: RunContext) -> bool:
    """The ``applies`` of a rule that judges GPU or CPU use: enough samples to say anything
    (:data:`~gpuprobe.tools.monitor.summary.MIN_SAMPLES`; ``monitor-too-short`` says otherwise)."""
    return ctx.enough_samples


def gpu_subject(st: GpuStats) -> str:
    """``"GPU 0"``: the subject of a finding about one GPU."""
    return f"GPU {st.index}"


def gpu_label(st: GpuStats) -> str:
    """``"GPU 0 (NVIDIA RTX A5000)"``, or ``"GPU 0"`` without a name: the GPU in a title."""
    return f"GPU {st.index}" + (f" ({st.name})" if st.name else "")
