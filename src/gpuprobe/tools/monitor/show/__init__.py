"""The views of ``gpuprobe monitor``'s results, registered with :mod:`gpuprobe.core.render` as
this package is imported (the tool's ``__init__`` imports it): :mod:`.files`, :mod:`.html`, :mod:`.pack`, :mod:`.plots`, :mod:`.terminal`, :mod:`.top`."""

from __future__ import annotations

from gpuprobe.tools.monitor.show import files, html, pack, plots, terminal, top

__all__ = ["files", "html", "pack", "plots", "terminal", "top"]
