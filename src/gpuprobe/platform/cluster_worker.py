"""Imported for its effect, by each worker process of a cluster gpuprobe starts itself
(``LocalCluster(preload=[...])``, :mod:`gpuprobe.tools.scale.engine`): the worker ignores SIGINT.

A terminal's Ctrl-C goes to every process of the foreground process group, the worker processes
that ``LocalCluster`` spawned included: each of them printed its own ``KeyboardInterrupt``
traceback (5-6 of them, 74-80 lines, issue 41 #1) while gpuprobe, which owns them, was stopping
them anyway. gpuprobe stops its workers itself (they also exit when it dies: Dask's nanny
watches its parent). Importing this module anywhere else makes that process deaf to Ctrl-C:
do not."""

from __future__ import annotations

import contextlib
import signal
import threading

__all__: list[str] = []

if threading.current_thread() is threading.main_thread():
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
