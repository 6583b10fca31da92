"""What a real H200 measured (tests/data/bench/README.md), judged and drawn again by this
checkout: no figure above its card's peak, rates in plain units, findings that name the right
framework and the right cause, tables within 80 columns."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path

import pytest

from gpuprobe.platform.inventory import Inventory, load
from gpuprobe.tools.bench.model import BenchReport, BenchResult
from gpuprobe.tools.bench.rules import judge
from gpuprobe.tools.bench.runner import add_peaks

DATA = Path(__file__).resolve().parents[2] / "data" / "bench"
WIDTH = 80


@pytest.fixture(scope="module")
def inv() -> Inventory:
    return load(DATA / "h200-info.json")


def _recorded(fw: str) -> BenchReport:
    return BenchReport.from_dict(json.loads((DATA / f"h200-{fw}.json").read_text()))


def _again(fw: str, inv: Inventory) -> BenchReport:
    """The recorded results with their peaks and findings made again by this checkout."""
    rep = _recorded(fw)
    bare = [
        dataclasses.replace(
            r, values={k: v for k, v in r.values.items() if k not in ("peak", "pct_peak")}
        )
        for r in rep.results
    ]
    envs = {(w.framework, w.device): w.environment for w in rep.workers}
    results = add_peaks(bare, inv, envs)
    return dataclasses.replace(
        rep, results=tuple(results), findings=tuple(judge(results, rep.workers, inv))
    )


def _one(rep: BenchReport, workload: str, case: str, size: int) -> BenchResult:
    return next(
        r
        for r in rep.results
        if (r.workload, r.case, r.size) == (workload, case, size) and r.device != "cpu"
    )


@pytest.mark.parametrize("fw", ["torch", "cupy"])
def test_no_figure_above_its_peak(fw: str, inv: Inventory) -> None:
    # the run itself held float64 GEMMs against the 34 TFLOP/s CUDA-core figure: 145-185 %
    recorded = _recorded(fw)
    assert max(r.values.get("pct_peak") or 0 for r in recorded.results) > 180
    rep = _again(fw, inv)
    pct = {(r.workload, r.case, r.size): r.values.get("pct_peak") for r in rep.results}
    assert all(p is None or 0 < p <= 100 for p in pct.values()), pct
    f64 = _one(rep, "matmul", "float64", 8192)
    assert f64.values["peak"] == 67  # the H200 SXM's FP64 tensor cores (cuBLAS DGEMM uses them)
    assert f64.values["pct_peak"] == pytest.approx(100 * f64.values["tflops"] / 67)
    assert 90 < f64.values["pct_peak"] < 95
    # the rest as the run had them: bf16 against 989.5, d2d against 4800 GB/s
    assert _one(rep, "transfer", "d2d", 2**30).values["peak"] == 4800
    if fw == "torch":
        assert _one(rep, "matmul", "bfloat16", 8192).values["peak"] == 989.5
        pcie = _one(rep, "transfer", "h2d-pinned", 2**30).values["peak"]
        assert pcie == pytest.approx(63.0, abs=0.01)  # PCIe gen 5 x16


@pytest.mark.parametrize(
    ("fw", "how", "naive_us", "device_us"),
    [("torch", "torch.cuda.Event", 11.3, 97.5), ("cupy", "cupy.cuda.Event", 12.4, 239.1)],
)
def test_e8_fix_is_in_the_framework_that_made_the_mistake(
    fw: str, how: str, naive_us: float, device_us: float, inv: Inventory
) -> None:
    # the card's CuPy run was told to use torch.cuda.Event
    (f,) = [f for f in _again(fw, inv).findings if f.id == "bench-naive-timing-misleading"]
    ev = {e.name: e.value for e in f.evidence}
    assert ev["naive"] == pytest.approx(naive_us * 1e-6, abs=0.05e-6)
    assert ev["device"] == pytest.approx(device_us * 1e-6, abs=0.05e-6)
    assert f.fix is not None and how in f.fix
    assert ("torch" in f.fix) == (fw == "torch")


def test_int8_far_below_peak_at_a_steady_clock_points_at_the_kernel(inv: Inventory) -> None:
    # the H200 ran torch int8 (torch._int_mm) at 131 TOP/s, 7 % of 1979, with its SM clock at
    # 1980 MHz throughout and no clock-event reason: the run's finding sent the user to look for
    # throttling and power caps
    (f,) = [f for f in _again("torch", inv).findings if f.id == "bench-matmul-below-peak"]
    assert "int8" in f.title and "7 %" in f.title and "1979" in f.title
    assert f.fix is not None and "torch._int_mm" in f.fix and "1980-1980 MHz" in f.fix
    assert "throttling" not in f.fix and "power cap" not in f.fix
    # a card that NVML saw held back is still sent to look at the card
    r = _one(_again("torch", inv), "matmul", "int8", 16384)
    assert r.conditions is not None
    capped = dataclasses.replace(
        r, conditions=dataclasses.replace(r.conditions, clock_event_reasons=("hw_slowdown",))
    )
    (g,) = [f for f in judge([capped], [], inv) if f.id == "bench-matmul-below-peak"]
    assert g.fix is not None and "throttling" in g.fix


def _text(rep: BenchReport, width: int = WIDTH) -> str:
    from rich.console import Console

    from gpuprobe.tools.bench.show.table import render_bench

    con = Console(file=io.StringIO(), width=width, color_system=None, highlight=False)
    render_bench(rep, con)
    out = con.file.getvalue()
    assert isinstance(out, str)
    return out


@pytest.mark.parametrize("fw", ["torch", "cupy"])
def test_tables_fit_80_columns_with_rates_in_plain_numbers(fw: str, inv: Inventory) -> None:
    text = _text(_again(fw, inv))
    lines = text.splitlines()
    assert max(len(x) for x in lines) <= WIDTH
    # the run printed 4.26e+03 GB/s (d2d), (3.53e+04 GB/s?) (E8's host clock) and
    # 5.14e+04 GFLOP/s (crossover): rates read with three digits and no exponent
    assert not re.search(r"\de\+\d", text), [x for x in lines if re.search(r"\de\+\d", x)]
    assert "4260 GB/s" in text
    pct = [int(m) for m in re.findall(r"│\s+(\d+) % │", text)]
    assert pct and max(pct) <= 100
    if fw == "torch":
        assert "(35300 GB/s?)" in text and "51.4 TFLOP/s" in text
        # int8 in TOP/s, in the table and in the finding (which said "131 TFLOP/s")
        assert "131 TOP/s" in text and "TFLOP/s, 7 %" not in text
        assert "evidence: tflops=131.4 TOP/s" in text


def test_an_exact_product_reads_err_0(inv: Inventory) -> None:
    # the H200's float64 products up to n = 256 matched NumPy's exactly: "err 0.0e+00" then
    rep = _again("torch", inv)
    r = _one(rep, "matmul", "float64", 1024)
    exact = dataclasses.replace(r, values={**r.values, "rel_error": 0.0})
    text = _text(dataclasses.replace(rep, results=(exact,), findings=()))
    assert "err 0;" in text and "e+00" not in text


@pytest.mark.parametrize(("fw", "best"), [("torch", "bfloat16"), ("cupy", "float16")])
def test_a_spread_the_power_cap_explains_is_not_sent_to_an_idle_machine(
    fw: str, best: str, inv: Inventory
) -> None:
    # at 16384³ the H200's half-precision times fell as it reached its 700 W cap (bf16 730 → 662
    # TFLOP/s over 21 repetitions; NVML: sw_power_cap), an interquartile range over 10 % of the
    # median: the run's advice said to re-run on an idle machine, which the card already was
    rep = _again(fw, inv)
    r = _one(rep, "matmul", best, 16384)
    assert r.measurement is not None and r.measurement.too_spread
    assert r.conditions is not None and r.conditions.clock_event_reasons == ("sw_power_cap",)
    (f,) = [
        f for f in rep.findings if f.id == "bench-precision-tradeoff" and f.subject.endswith("0")
    ]
    assert f.fix is not None and "idle machine" not in f.fix
    assert f.fix.startswith(f"{best} ran 1") and "power cap" in f.fix
    # a spread with no reason from NVML is still doubted
    other = dataclasses.replace(
        r, conditions=dataclasses.replace(r.conditions, clock_event_reasons=())
    )
    again = [other if x is r else x for x in rep.results]
    (g,) = [
        f
        for f in judge(again, rep.workers, inv)
        if f.id == "bench-precision-tradeoff" and f.subject.endswith("0")
    ]
    assert g.fix is not None and "re-run on an idle machine" in g.fix
