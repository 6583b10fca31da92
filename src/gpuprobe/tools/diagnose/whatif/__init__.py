"""The what-if engine: the analysed steps' dependency graph read from the trace
(:mod:`.graph`), replayed with one cause changed (:mod:`.replay`); what each fix would save is
the step time its replay saves (:mod:`.price`). Rules build the change their fix makes
(:mod:`.changes`) and ask :class:`~.price.WhatIf` for its gain."""

from gpuprobe.tools.diagnose.whatif.graph import ReplayGraph, launch_threads, read_graph
from gpuprobe.tools.diagnose.whatif.replay import Change, replay

__all__ = ["Change", "ReplayGraph", "launch_threads", "read_graph", "replay"]
