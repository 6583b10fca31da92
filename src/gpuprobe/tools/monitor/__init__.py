"""Watch a job use the machine and keep every sample.

- :mod:`~gpuprobe.tools.monitor.records`: what one sample holds (host, process tree, each GPU).
- :mod:`~gpuprobe.tools.monitor.sampler`: one thread, drift-free, GPU through the NVML door, host through
  psutil (:mod:`~gpuprobe.tools.monitor.readers`); measures its own CPU cost, per part and per
  NVML call kind.
- :mod:`~gpuprobe.tools.monitor.timeline`: the append-only JSON Lines file on disk, and its reader.
- :mod:`~gpuprobe.tools.monitor.run`: ``gpuprobe run``: launch a command, forward signals, record it.
- :mod:`~gpuprobe.tools.monitor.summary`: a recording in numbers (per GPU, for the host), computed once
  and judged by :mod:`~gpuprobe.tools.monitor.rules` (one module per family of findings).
- :mod:`~gpuprobe.tools.monitor.record`: ``gpuprobe.record()`` around a block of Python.
- :mod:`~gpuprobe.tools.monitor.live` (``gpuprobe top``) and :mod:`~gpuprobe.tools.monitor.exporter`
  (``gpuprobe export``, Prometheus).

Times in this package are seconds: ``time.time()`` for timestamps, ``time.monotonic()`` for the
schedule.
"""

from __future__ import annotations

from gpuprobe.tools.monitor import show  # registers the views of this tool's results

__all__ = ["show"]
