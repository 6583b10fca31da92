"""The one way gpuprobe makes a matplotlib figure: a :class:`Chart` built directly on
``matplotlib.figure.Figure``, never through pyplot.

pyplot's global state belongs to the user: choosing a backend (``matplotlib.use("Agg")``) or
registering figures with pyplot would stop a notebook's own ``plt.show()`` from drawing, or show
our figures a second time at the end of a cell. A :class:`Chart` is a plain figure that Jupyter
shows inline by itself (``_repr_png_``), whatever backend is in use, and that saves with
``savefig`` like any other; :func:`save_figure` writes one in the format its file's suffix names.
Import this module lazily: it imports matplotlib, and without it
(matplotlib is the extra ``gpuprobe[plot]``) the import raises
:class:`~gpuprobe.ui.plot_extra.ChartsUnavailable`, one line naming the extra.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from gpuprobe.core.errors import UsageError
from gpuprobe.core.files import atomic_open
from gpuprobe.ui.plot_extra import figure_path, unavailable

try:
    from matplotlib.figure import Figure
except ImportError as _exc:  # the extra gpuprobe[plot] is not installed (or does not import)
    raise unavailable(_exc) from None

__all__ = ["Chart", "figure_png", "new_chart", "save_figure"]

NOTEBOOK_DPI = 80  # dots per inch of the PNG a notebook shows: a 12-inch chart is 960 px wide
FILE_DPI = 100  # dots per inch of a chart written to a file: a 12-inch chart is 1200 px wide


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


def save_figure(
    fig: Figure,
    path: str | os.PathLike[str],
    *,
    option: str | None = None,
    private: bool = False,
) -> Path:
    """Write ``fig`` to ``path`` in the format its suffix names (one of
    :data:`~gpuprobe.ui.plot_extra.FIGURE_FORMATS`; see
    :func:`~gpuprobe.ui.plot_extra.figure_path`, ``option`` as there) and return the path. The
    renderer is picked for this one save: pyplot and the user's rcParams are left alone. The file
    is written whole or not at all (:func:`~gpuprobe.core.files.atomic_open`; ``private``: 0600,
    for a chart titled with a command line). A file that cannot be written is a one-line
    :class:`~gpuprobe.core.errors.UsageError`."""
    out = figure_path(path, option)
    fmt = out.suffix.lower().lstrip(".")
    try:
        with atomic_open(out, private=private) as f:
            fig.savefig(f, format="jpeg" if fmt == "jpg" else fmt, dpi=FILE_DPI)
    except OSError as exc:
        where = f"{option} {path}" if option else str(path)
        raise UsageError(f"{where}: cannot write it ({exc.strerror or exc})") from None
    return out
