"""Memory: out-of-memory errors explained, the largest batch that fits, and precision.

- :mod:`~gpuprobe.tools.memory.oom`: :func:`explain_oom` and the opt-in exception hook.
- :mod:`~gpuprobe.tools.memory.fit`: :func:`fit`, the search for the largest batch that fits, and the
  throughput at each size tried (E9's curve).
- :mod:`~gpuprobe.tools.memory.precision`: :func:`precision_sweep`, latency and error per dtype (E4).
- :mod:`~gpuprobe.tools.memory.demo`: the small built-in models ``gpuprobe fit`` and
  ``gpuprobe precision`` run.
- :mod:`~gpuprobe.tools.memory.isolate`: one trial in a child process, optionally under a memory cap.

Units: bytes, seconds. E-codes: docs/experiments.md.
"""

from __future__ import annotations

from gpuprobe.tools.memory import show  # registers the views of this tool's results

__all__ = ["show"]
