"""The what-if engine's records: one priced fix per finding. Times in µs; gains in [0, 1]."""

from __future__ import annotations

from dataclasses import dataclass

from gpuprobe.core.records import Record

__all__ = ["PricedFix"]


@dataclass(frozen=True)
class PricedFix(Record):
    """What fixing finding ``id`` saves, from the replay of the step graph with its cause
    changed: ``gain`` the share of the steady pace it saves (``window_us``: that pace replayed
    unchanged, :func:`~.replay.steady_us`), ``saved_us`` that share of the analysed steady
    time, ``note`` how the change was made."""

    id: str
    saved_us: float
    gain: float
    window_us: float
    note: str = ""
