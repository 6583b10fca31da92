"""Every diagnose view opens the same way: ``gpuprobe diagnose[ --kernels] TRACE-OR-FOLDER`` on
its first line, the facts indented 2 on the next (never ``FOLDER: facts`` run together, nor a
``:`` ending the path's line)."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable
from typing import Any

import gpuprobe
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.kernels import kernel_breakdown
from gpuprobe.tools.diagnose.kineto import read_trace
from gpuprobe.tools.diagnose.show.cycles import print_cycles
from gpuprobe.tools.diagnose.show.ranks import print_kernels, print_ranks
from gpuprobe.ui.console import make_console

from .realdata import DATA, DLRM8, DLRM_FILES

CYCLES = DATA / "cycles_r50_nw0"


def _head(show: Callable[[Any, Any], None], result: Any, width: int = 300) -> list[str]:
    """The first two lines ``show`` prints of ``result`` (wide: nothing wraps)."""
    buf = io.StringIO()
    show(result, make_console(file=buf, width=width, color_system=None, force_terminal=False))
    return buf.getvalue().splitlines()[:2]


def test_a_folder_of_ranks_and_one_of_cycles() -> None:
    assert _head(print_ranks, gpuprobe.diagnose_folder(DLRM8)) == [
        f"gpuprobe diagnose {DLRM8}",
        "  8 ranks (rank from distributedInfo), 8 collectives matched across ranks",
    ]
    assert _head(print_cycles, gpuprobe.diagnose_folder(CYCLES)) == [
        f"gpuprobe diagnose {CYCLES}",
        "  2 profiler cycles of one process (pid 25738) over 470.2 s, not ranks",
    ]


def test_the_kernels_view_of_one_trace() -> None:
    kb = kernel_breakdown(TraceContext(read_trace(DLRM_FILES[0])))
    assert _head(print_kernels, kb) == [
        f"gpuprobe diagnose --kernels {DLRM_FILES[0]}",
        "  6,851 µs of GPU activity in the steps analysed",
    ]
    ranked = _head(print_kernels, dataclasses.replace(kb, rank=3))
    assert ranked[1] == "  rank 3: 6,851 µs of GPU activity in the steps analysed"
