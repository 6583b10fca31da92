"""The one way gpuprobe makes a matplotlib figure: a :class:`Chart` built directly on
``matplotlib.figure.Figure``, never through pyplot.

pyplot's global state belongs to the user: choosing a backend (``matplotlib.use("Agg")``) or
registering figures with pyplot would stop a notebook's own ``plt.show()`` from drawing, or show
our figures a second time at the end of a cell. A :class:`Chart` is a plain figure that Jupyter
shows inline by itself (``_repr_png_``), whatever backend is in use, and that saves with
``savefig`` like any other. Import this module lazily: it imports matplotlib, and without it
(matplotlib is the extra ``gpuprobe[plot]``) the import raises
:class:`~gpuprobe.ui.plot_extra.ChartsUnavailable`, one line naming the extra.
"""

from __future__ import annotations

import io
from typing import Any

from gpuprobe.ui.plot_extra import unavailable

try:
    from matplotlib.figure import Figure
except ImportError as _exc:  # the extra gpuprobe[plot] is not installed (or does not import)
    raise unavailable(_exc) from None

__all__ = ["Chart", "figure_png", "new_chart"]

NOTEBOOK_DPI = 80  # dots per inch of the PNG a notebook shows: a 12-inch chart is 960 px wide


class Chart(Figure):
    """A matplotlib figure that shows itself in Jupyter (as a PNG) without pyplot."""

    def _repr_png_(self) -> bytes:
        return figure_png(self, dpi=NOTEBOOK_DPI)

    def __repr__(self) -> str:
        w, h = self.get_size_inches()
        return f"<gpuprobe chart {w:.0f}×{h:.0f} in, {len(self.axes)} axes>"


def new_chart(**kwargs: Any) -> Chart:
    """A new :class:`Chart`; ``kwargs`` as for ``matplotlib.figure.Figure``."""
    return Chart(**kwargs)


def figure_png(fig: Figure, *, dpi: int = 100) -> bytes:
    """The figure as PNG bytes (the Agg renderer is picked for this one save only)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()
