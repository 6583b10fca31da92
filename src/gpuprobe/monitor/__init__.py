"""Watch a job use the machine and keep every sample.

- :mod:`~gpuprobe.monitor.records`: what one sample holds (host, process tree, each GPU).
- :mod:`~gpuprobe.monitor.sampler`: one thread, drift-free, GPU through the NVML door, host through
  psutil; measures its own CPU cost.
- :mod:`~gpuprobe.monitor.timeline`: the append-only JSON Lines file on disk, and its reader.
- :mod:`~gpuprobe.monitor.run`: ``gpuprobe run``: launch a command, forward signals, record it.
- :mod:`~gpuprobe.monitor.summary`: a recording in numbers (per GPU, for the host), computed once
  and judged by :mod:`~gpuprobe.monitor.rules` (one module per family of findings).
- :mod:`~gpuprobe.monitor.record`: ``gpuprobe.record()`` around a block of Python.
- :mod:`~gpuprobe.monitor.live` (``gpuprobe top``) and :mod:`~gpuprobe.monitor.exporter`
  (``gpuprobe export``, Prometheus).

Times in this package are seconds: ``time.time()`` for timestamps, ``time.monotonic()`` for the
schedule.
"""

from __future__ import annotations

__all__: list[str] = []
