"""``gpuprobe doctor``: does this GPU setup really work? Verdicts with evidence and the fix."""

from __future__ import annotations

from gpuprobe.tools.doctor import show  # registers the views of this tool's results

__all__ = ["show"]
