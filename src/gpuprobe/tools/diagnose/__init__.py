"""``gpuprobe diagnose``: read a PyTorch profiler (Kineto) trace and say why the GPU waits."""

from __future__ import annotations

from gpuprobe.tools.diagnose import show  # registers the views of this tool's results

__all__ = ["show"]
