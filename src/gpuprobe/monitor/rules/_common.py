"""Helpers shared by the rule modules: the findings' group and how a GPU is named in them."""

from __future__ import annotations

from gpuprobe.monitor.summary import GpuStats

__all__ = ["GROUP", "gpu_label", "gpu_subject"]

GROUP = "monitor"


def gpu_subject(st: GpuStats) -> str:
    """``"GPU 0"``: the subject of a finding about one GPU."""
    return f"GPU {st.index}"


def gpu_label(st: GpuStats) -> str:
    """``"GPU 0 (NVIDIA RTX A5000)"``, or ``"GPU 0"`` without a name: the GPU in a title."""
    return f"GPU {st.index}" + (f" ({st.name})" if st.name else "")
