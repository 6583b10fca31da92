"""Whether charts can be drawn here, told without importing matplotlib.

matplotlib (with fonttools and pillow, about 60 MB installed) is the optional extra
``gpuprobe[plot]``: ``pip install gpuprobe`` gives every command but the pictures. A chart asked
for without it raises :class:`ChartsUnavailable`, whose one-line message names the extra; the
command line prints that line and writes everything else (a run's ``report.html`` without its
charts, ``summary.json``, a benchmark's table).

Every chart written to a file goes through :func:`figure_path` (checked here, before any work and
without matplotlib: ``bench --plot x.gif`` fails at once) and then
:func:`gpuprobe.ui.chart.save_figure`, in the format the file's suffix names
(:data:`FIGURE_FORMATS`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from gpuprobe.core.errors import EXIT_USAGE, GpuprobeError, UsageError

__all__ = [
    "CHARTS_MISSING",
    "FIGURE_FORMATS",
    "PLOT_INSTALL",
    "ChartsUnavailable",
    "charts_unavailable",
    "figure_path",
    "unavailable",
]

# Where gpuprobe is installed (from a wheel or a checkout), pip reads the extra from the installed
# metadata and adds only matplotlib and what it needs.
PLOT_INSTALL = "pip install 'gpuprobe[plot]'"
CHARTS_MISSING = f"charts need matplotlib: {PLOT_INSTALL}"
# The file formats a chart is written in, by the file's suffix: those matplotlib's own backends
# write with nothing more than matplotlib's dependencies (JPEG through pillow, which it requires).
FIGURE_FORMATS = (".png", ".svg", ".pdf", ".jpg", ".jpeg")


class ChartsUnavailable(GpuprobeError, ImportError):
    """matplotlib cannot be imported: no chart can be drawn. Also an :class:`ImportError`, so
    ``except ImportError`` catches it as it would a missing package. ``written`` holds the
    files written before it was raised (a report page without its charts)."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str = CHARTS_MISSING, written: Sequence[Path] = ()) -> None:
        super().__init__(message)
        self.written: tuple[Path, ...] = tuple(written)


def charts_unavailable() -> ChartsUnavailable | None:
    """None where matplotlib imports; otherwise the error to raise (or to print as a note)."""
    try:
        import matplotlib.figure  # noqa: F401
    except ImportError as exc:
        return unavailable(exc)
    return None


def unavailable(exc: ImportError) -> ChartsUnavailable:
    """The error for a failed ``import matplotlib...``: the extra when matplotlib is not there;
    with the reason too when it is there but does not import (a broken install)."""
    missing = (
        isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == "matplotlib"
    )
    return ChartsUnavailable() if missing else ChartsUnavailable(f"{CHARTS_MISSING} ({exc})")


def figure_path(
    path: str | os.PathLike[str], option: str | None = None, *, also: Sequence[str] = ()
) -> Path:
    """``path`` as a :class:`~pathlib.Path` when its suffix names one of :data:`FIGURE_FORMATS`
    or of ``also`` (``.html`` where a page may be asked for), in any case; otherwise a one-line
    :class:`~gpuprobe.core.errors.UsageError` naming them, prefixed with ``option`` (``--plot``)
    where the path came from one."""
    if not isinstance(path, (str, os.PathLike)):
        raise UsageError(
            f"a chart's file is a path (str or pathlib.Path), not {type(path).__name__}"
        )
    out = Path(path)
    formats = (*FIGURE_FORMATS, *also)
    if out.suffix.lower() not in formats:
        where = f"{option} {os.fspath(path)}" if option else os.fspath(path)
        raise UsageError(f"{where}: give a file ending in {', '.join(formats)}")
    return out
