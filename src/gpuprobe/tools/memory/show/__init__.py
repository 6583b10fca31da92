"""The views of ``gpuprobe memory``'s results, registered with :mod:`gpuprobe.core.render` as
this package is imported (the tool's ``__init__`` imports it): :mod:`.fit`, :mod:`.oom`, :mod:`.precision`."""

from __future__ import annotations

from gpuprobe.tools.memory.show import fit, oom, precision

__all__ = ["fit", "oom", "precision"]
