"""The views of ``gpuprobe diagnose``'s results, registered with :mod:`gpuprobe.core.render` as
this package is imported (the tool's ``__init__`` imports it): :mod:`.cycles`, :mod:`.html`,
:mod:`.ranks`, :mod:`.reprs`, :mod:`.text`."""

from __future__ import annotations

from gpuprobe.tools.diagnose.show import cycles, html, ranks, reprs, text

__all__ = ["cycles", "html", "ranks", "reprs", "text"]
