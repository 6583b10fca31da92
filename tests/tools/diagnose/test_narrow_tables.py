"""The per-step tables on a narrow terminal: a column that does not fit is left out and named,
never cut (a 9-column host table once printed "op" for "ops" and 556 for 5566)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from _support import too_wide
from gpuprobe.tools.diagnose.engine import diagnose
from gpuprobe.ui.console import make_console

TRACE = Path(__file__).parents[2] / "data" / "diagnose" / "kineto_r50_nw0_a.pt.trace.json.gz"


@pytest.mark.parametrize("width", [50, 60, 80, 120])
def test_every_number_shown_is_whole_or_its_column_is_named(width: int) -> None:
    from gpuprobe.tools.diagnose.show.text import print_diagnosis

    d = diagnose(TRACE)
    buf = io.StringIO()
    print_diagnosis(d, make_console(file=buf, width=width, color_system=None))
    text = buf.getvalue()
    lines = text.splitlines()
    assert too_wide(text, width) == []
    host = lines.index("Host per step (ms)")
    header = lines[host + 1].split()
    rows = [line.split() for line in lines[host + 3 :] if line.startswith(("#", "trace"))]
    assert rows
    # every cell of a row is a whole number as the step's record has it: none folded or cut
    steps = {f"#{s.step}": s for s in d.steps}
    for r in rows:
        s = steps.get(r[0])
        if s is None:
            continue
        t = s.duration_us if s.cpu_duration_us is None else s.cpu_duration_us
        assert r[1] == f"{t / 1e3:.1f}"
        if "ops" in header:
            assert r[header.index("ops")] == str(s.cpu_ops)
    left = re.search(r"left out to fit the terminal: ([^(]+)", " ".join(lines))
    if width >= 120:
        assert "left out" not in text.split("Host per step")[1].split("Steps' GPU span")[0]
    elif left:
        assert all(name.strip() not in header for name in left.group(1).split(","))


@pytest.mark.parametrize("width", [1, 10, 20, 30])
def test_a_tiny_terminal_draws_every_table_without_a_traceback(width: int) -> None:
    """COLUMNS of 30 or less once raised ValueError (a column dropped twice from the tables
    that leave columns out): every table still prints, with what it left out named."""
    from gpuprobe.tools.diagnose.show.text import print_diagnosis

    d = diagnose(TRACE)
    buf = io.StringIO()
    print_diagnosis(d, make_console(file=buf, width=width, color_system=None), verbose=True)
    words = " ".join(buf.getvalue().split())  # a title wraps at 10 columns
    assert "Host per step (ms)" in words and "left out to fit" in words
