"""Every public result's ``repr`` is one short line (what it is and its headline figures), built
from the fixtures in tests/data; the long text stays in ``str()`` and ``_repr_html_`` (issue 27:
a Diagnosis repr was 4.6k characters, a MultiRankDiagnosis 32k)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _results import BUILDERS, NOT_RESULTS

import gpuprobe
from gpuprobe.core.render import MAX_REPR_CHARS

# the results whose str() is the command's text, pages long: it must stay there
LONG_TEXT = {
    "BenchReport": 5000,
    "CycleDiagnosis": 3000,
    "Diagnosis": 3000,
    "DoctorReport": 1000,
    "FitResult": 500,
    "Inventory": 2000,
    "KernelBreakdown": 2000,
    "MultiRankDiagnosis": 2000,
    "OomReport": 300,
    "PackReport": 300,
    "ProfileReport": 1000,
    "TraceComparison": 5000,
}


def test_every_public_type_is_built_or_named_as_no_result() -> None:
    assert set(gpuprobe._TYPES) == set(BUILDERS) | NOT_RESULTS


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_repr_is_one_short_line(name: str) -> None:
    obj = BUILDERS[name]()
    assert type(obj).__name__ == name
    r = repr(obj)
    assert len(r) <= MAX_REPR_CHARS and "\n" not in r, r
    assert name in r and " object at 0x" not in r
    # one style for every result (issue 41: `<DoctorReport …>` beside `BenchReport(…)`)
    assert re.fullmatch(rf"<{name} [^<>]*(<[^<>]*>[^<>]*)*>", r), r
    assert r.count(f"{name}(") == 0
    if name in LONG_TEXT:
        text = str(obj)
        assert len(text) >= LONG_TEXT[name] and "\n" in text
    if hasattr(obj, "_repr_html_"):
        assert len(obj._repr_html_()) > len(r)


@pytest.mark.parametrize("name", ["TraceComparison", "OomReport"])
def test_comparison_and_oom_report_have_html(name: str) -> None:
    page = BUILDERS[name]()._repr_html_()
    assert page.lstrip().startswith("<") and len(page) > 300


# str() wider than 80 columns, each for a reason still open (issue 27): bench's table keeps its
# 140 columns of numbers, scale's key/value tables their long values; and the types whose str()
# is their one-line repr (at most MAX_REPR_CHARS)
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_str_fits_80_columns_or_hangs(name: str) -> None:
    """print(result) in an 80-column terminal: every line fits, but for a single word (a path)
    longer than the line after its indent."""
    lines = str(BUILDERS[name]()).splitlines()
    wide = [line for line in lines if len(line) > 80 and len(line.split()) > 1]
    assert not wide, wide[:3]
