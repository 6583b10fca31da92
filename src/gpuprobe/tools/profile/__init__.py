"""Profile an unmodified PyTorch command: ``gpuprobe profile -- python train.py``.

- :mod:`~gpuprobe.tools.profile.startup`: the code that runs inside the command's Python
  processes (a ``sitecustomize`` and ``_gpuprobe_profile``; standalone, never imports gpuprobe).
- :mod:`~gpuprobe.tools.profile.hook`: its settings, the environment that arms it, the statuses
  it writes back.
- :mod:`~gpuprobe.tools.profile.engine`: run the command under the monitor's recorder, then
  diagnose the traces (this tool uses two others: ``monitor`` to run and record, ``diagnose``
  to judge; docs/architecture.md lists the edges).
- :mod:`~gpuprobe.tools.profile.ondemand`: ``--now``, a window in a job that is running.
"""

from __future__ import annotations

from gpuprobe.tools.profile import show  # registers the views of this tool's results

__all__ = ["show"]
