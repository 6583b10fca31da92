"""The views of ``gpuprobe bench``'s results, registered with :mod:`gpuprobe.core.render` as
this package is imported (the tool's ``__init__`` imports it): :mod:`.plots`, :mod:`.table`."""

from __future__ import annotations

from gpuprobe.tools.bench.show import plots, table

__all__ = ["plots", "table"]
