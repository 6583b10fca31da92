"""``gpuprobe doctor --cluster``: doctor on every node of a Dask cluster, the odd node named."""

from __future__ import annotations

import time

# When this package began to load in this process: a worker's first doctor or bench counts its
# import of gpuprobe's fleet (unpickling the node function loads it) as the node's own time.
LOADED_AT = time.perf_counter()

from gpuprobe.tools.fleet import show  # noqa: E402  (registers the views of this tool's results)

__all__ = ["LOADED_AT", "show"]
