"""What a notebook user sees of each result: a short repr, a readable str, an HTML repr; and a
Measurement that says when its spread is too wide to trust."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "tools" / "memory"))
from test_memory_everyday import _level

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.platform.inventory import load
from gpuprobe.platform.measurement import SPREAD_WARN_FRACTION, Measurement
from gpuprobe.tools.doctor.engine import doctor
from gpuprobe.tools.memory.model import PrecisionReport, PrecisionResult
from gpuprobe.tools.monitor.pack_model import PackReport
from gpuprobe.tools.monitor.rules.pack import judge as pack_judge

DATA = Path(__file__).parents[1] / "data"


def test_a_thousand_times_make_a_short_repr() -> None:
    m = Measurement.from_times("add", "numpy", "cpu", [1e-3 + (i % 3) * 1e-6 for i in range(1000)])
    assert len(repr(m)) < 200 and repr(m).startswith(
        "<Measurement add [numpy cpu]: median 1 ms, IQR 0% of median, n=1000"
    )
    assert not m.too_spread and "WARNING" not in str(m) and "warning" not in m._repr_html_()


def test_a_wide_spread_is_said() -> None:
    # IQR 3 ms around a 10 ms median: 30 %
    m = Measurement.from_times("step", "torch", "cpu", [0.008, 0.0085, 0.01, 0.0115, 0.012] * 20)
    assert m.spread == pytest.approx(0.3, abs=0.01) and m.spread > SPREAD_WARN_FRACTION
    assert m.too_spread and not m.trusted  # 40 of the 100 runs agree: fewer than half
    assert "WARNING: not trustworthy: only 40 of 100 runs agree" in str(m)
    assert "the interquartile range is 30% of the median" in str(m)
    assert "not trustworthy, the runs never agreed" in repr(m)
    assert "warning:" in m._repr_html_()


def test_doctor_report_and_inventory_are_short_and_readable() -> None:
    inv = load(DATA / "t4.json")
    assert len(repr(inv)) < 300 and "Tesla T4" in repr(inv)
    report = doctor(inventory=inv)
    r = repr(report)
    assert r.startswith("<DoctorReport ") and len(r) < 200
    text = str(report)
    assert "verdict:" in text and len(text) < 6000
    assert "<table>" in report._repr_html_()
    assert "Host" in str(inv) and "Tesla T4" in str(inv)


def test_findings_print_as_people_read_them() -> None:
    f = Finding(
        "x-slow",
        Status.WARN,
        "it is slow",
        (Evidence("t", 12040.0, "ms"),),
        fix="run `gpuprobe top`",
    )
    assert repr(f) == "<Finding warn x-slow: it is slow>"
    assert str(f) == "[warn] x-slow: it is slow\n  evidence: t=12.04 s\n  fix: run `gpuprobe top`"
    html = f._repr_html_()
    assert "<code>gpuprobe top</code>" in html and "`" not in html


def test_pack_and_precision_reports_are_short_with_html() -> None:
    pr = PrecisionReport(
        device="cpu",
        batch=8,
        results=(
            PrecisionResult(dtype="fp32", outcome="ok", median_s=0.5, speedup=1.0, rel_error=0.0),
            PrecisionResult(dtype="bf16", outcome="ok", median_s=0.3, speedup=1.7, rel_error=1e-3),
        ),
        recommended="bf16",
    )
    assert repr(pr) == (
        "<PrecisionReport cpu, batch 8: fp32 1.00×, bf16 1.70×; recommended bf16; "
        "findings: no findings>"
    )
    assert "<pre>" in pr._repr_html_() and "bf16" in pr._repr_html_()
    pk = PackReport(
        command=("python", "job.py"),
        levels=(_level(1, 0.1, 1.0), _level(2, 0.1, 1.0)),
        unit="jobs/h",
        recommended=2,
        cores=4,
    )
    from dataclasses import replace

    pk = replace(pk, findings=tuple(pack_judge(pk)))
    assert repr(pk).startswith("<PackReport 2 levels of python job.py: run 2 at once")
    assert "run 2 at once" in pk._repr_html_() and "<pre>" in pk._repr_html_()
