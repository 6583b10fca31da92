"""``gpuprobe doctor --cluster``: doctor on every node of a Dask cluster, the odd node named."""

from __future__ import annotations

from gpuprobe.tools.fleet import show  # registers the views of this tool's results

__all__ = ["show"]
