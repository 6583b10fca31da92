"""The views of ``gpuprobe scale``'s results, registered with :mod:`gpuprobe.core.render` as
this package is imported (the tool's ``__init__`` imports it): :mod:`.lstsq`, :mod:`.plots`."""

from __future__ import annotations

from gpuprobe.tools.scale.show import lstsq, plots

__all__ = ["lstsq", "plots"]
