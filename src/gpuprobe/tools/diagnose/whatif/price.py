"""What a fix is worth: :class:`WhatIf` replays the trace's graph with the fix's change and
records the step time it saves, per finding id (:class:`~.model.PricedFix`). Rules ask it for
their gain (:meth:`WhatIf.price`); the diagnosis carries the priced fixes (``whatif`` in
``--json``). Times in µs.
"""

from __future__ import annotations

from functools import cached_property

from gpuprobe.tools.diagnose.columns import TraceColumns
from gpuprobe.tools.diagnose.whatif.graph import ReplayGraph, read_graph
from gpuprobe.tools.diagnose.whatif.model import PricedFix
from gpuprobe.tools.diagnose.whatif.replay import Change, replay_steps, steady_us

__all__ = ["WhatIf"]


class WhatIf:
    """The replays of one trace's analysed steps. A gain is the share of the steady pace a fix
    saves: the time the steps after the first take (:func:`~.replay.steady_us`), so that
    neither the first step's fill nor the drain after the last is counted as the fix's; with
    one step, the whole window. ``analysed_us``: the steps' steady time
    (:func:`~gpuprobe.tools.diagnose.rules._common.steady_total`), what ``saved_us`` is given
    over."""

    def __init__(self, ctx: TraceColumns, analysed_us: float) -> None:
        self.ctx = ctx
        self.analysed_us = analysed_us
        self.priced: dict[str, PricedFix] = {}

    @cached_property
    def graph(self) -> ReplayGraph | None:
        """The analysed steps' dependency graph (None without steps)."""
        return read_graph(self.ctx)

    @cached_property
    def base_us(self) -> float:
        """The steady pace replayed unchanged (equal to the recorded one up to the replay's
        error)."""
        g = self.graph
        return steady_us(g, replay_steps(g)) if g is not None else 0.0

    @property
    def recorded_us(self) -> float:
        """The steady pace as recorded."""
        g = self.graph
        return steady_us(g, g.recorded_done) if g is not None else 0.0

    def share_saved(self, change: Change) -> float:
        """The share of the steady pace the change saves (0..1)."""
        g = self.graph
        if g is None or change.empty or self.base_us <= 0:
            return 0.0
        new = steady_us(g, replay_steps(g, change))
        return min(max(1.0 - new / self.base_us, 0.0), 1.0)

    def price(self, id: str, change: Change, note: str = "") -> float:
        """The gain of finding ``id``'s fix: the share of the steady pace its change saves
        (0..1), recorded for the diagnosis with the µs it saves over the analysed time."""
        share = self.share_saved(change)
        self.priced[id] = PricedFix(
            id=id,
            saved_us=round(share * self.analysed_us, 3),
            gain=round(share, 6),
            window_us=round(self.base_us, 3),
            note=note,
        )
        return share

    def fixes(self) -> tuple[PricedFix, ...]:
        """The priced fixes, largest gain first."""
        return tuple(sorted(self.priced.values(), key=lambda p: -p.gain))
