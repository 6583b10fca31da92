"""Advice that matches the measurement, headings with the size run, charts a person can read."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from gpuprobe.platform.measurement import Measurement
from gpuprobe.tools.bench.model import BenchReport, BenchResult, Environment
from gpuprobe.tools.bench.rules import judge
from gpuprobe.tools.bench.show.plots import bench_figure, roofline_points
from gpuprobe.tools.bench.show.table import render_bench
from gpuprobe.tools.bench.workloads.matmul import PRECISION_FASTER_RATIO


def _mm(
    case: str, seconds: float, n: int = 512, device: str = "cpu", **values: float
) -> BenchResult:
    flop = 2.0 * n**3
    m = Measurement.from_times(
        f"matmul {case}",
        "torch",
        device,
        [seconds] * 3,
        work={"flop": flop, "bytes": 3 * 4 * n * n},
    )
    return BenchResult(
        "matmul",
        case,
        "torch",
        device,
        n,
        "n",
        measurement=m,
        values={"tflops": flop / seconds / 1e12, "rel_error": 1e-3, **values},
    )


def _fix(results: list[BenchResult]) -> str:
    return next(f for f in judge(results, []) if f.id == "bench-precision-tradeoff").fix


def test_no_lower_precision_is_recommended_when_it_ran_slower() -> None:
    # what this CPU measured: bf16 at 0.0004x fp32
    fix = _fix([_mm("float32", 0.01), _mm("bfloat16", 25.0), _mm("float16", 0.2)])
    assert "autocast" not in fix
    assert fix.startswith("keep float32 on torch cpu") and "bfloat16 0.0004×" in fix


def test_the_fastest_lower_precision_measured_faster_is_recommended() -> None:
    fix = _fix([_mm("float32", 0.01), _mm("bfloat16", 0.004), _mm("float16", 0.005)])
    assert "bfloat16 ran 2.5× float32's speed" in fix and "dtype=torch.bfloat16" in fix
    # just above float32, within the spread: not worth recommending
    fix = _fix([_mm("float32", 0.01), _mm("bfloat16", 0.01 / (PRECISION_FASTER_RATIO - 0.1))])
    assert fix.startswith("keep float32")


def _report(results: list[BenchResult], workloads: tuple[str, ...], quick: bool) -> BenchReport:
    return BenchReport(
        workloads=workloads,
        quick=quick,
        results=tuple(results),
        findings=(),
        workers=(),
        environment=Environment(hostname="h"),
    )


def _text(report: BenchReport, width: int) -> str:
    con = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    render_bench(report, con)
    return con.export_text()


def test_the_scale_heading_gives_the_size_run() -> None:
    m = Measurement.from_times("scale", "numpy", "cpu", [0.003] * 5)
    r = BenchResult(
        "scale", "timed", "numpy", "cpu", 5_000_000, "elements", measurement=m, values={"gbs": 26.7}
    )
    text = _text(_report([r], ("scale",), True), 120)
    assert "scale: E8, 5 M float32 × 2" in text and "50 M" not in text


@pytest.mark.parametrize("width", [80, 100, 160])
def test_bench_tables_fit_without_cutting_a_number(width: int) -> None:
    rs = [_mm(c, s) for c, s in (("float32", 0.0123), ("bfloat16", 4.56), ("int8", 0.000123))]
    rs.append(
        BenchResult(
            "matmul",
            "float64",
            "torch",
            "cpu",
            4096,
            "n",
            status="skipped",
            reason="skipped: one repetition would take ~1.13 s (limit 0.4 s)",
        )
    )
    text = _text(_report(rs, ("matmul",), False), width)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    for r in rs[:3]:
        assert (
            f"{r.values['tflops'] * 1e3:.3g} GFLOP/s" in text or f"{r.values['tflops']:.3g}" in text
        )
    if width == 80:
        assert "left out to fit the terminal: p20–p80" in text
    if width == 160:
        assert "left out" not in text and "p20–p80" in text


def test_roofline_points_never_sit_above_the_roofs_drawn() -> None:
    # int8 on a GPU runs far past the fp32 spec roof: it gets its own dashed roof
    rs = [
        _mm("float32", 0.002, n=8192, device="cuda:0", peak=67.0),
        _mm("int8", 0.0008, n=8192, device="cuda:0", peak=1979.0),
        _mm("float16", 0.0004, n=8192, device="cuda:0", peak=989.0),  # past its spec
    ]
    scale = Measurement.from_times(
        "scale", "torch", "cuda:0", [0.0001] * 3, work={"flop": 5e7, "bytes": 4e8}
    )
    rs.append(
        BenchResult(
            "scale",
            "timed",
            "torch",
            "cuda:0",
            50_000_000,
            "elements",
            measurement=scale,
            values={"gbs": 4000.0, "peak": 4800.0},
        )
    )
    report = _report(rs, ("matmul", "scale"), False)
    fig = bench_figure(report)
    (roof,) = fig.axes  # matmul and scale alone: no crossover or bandwidth panel, the roofline
    assert roof.get_title() == "roofline"
    roofs = [ln for ln in roof.get_lines() if len(ln.get_xdata()) > 1]
    labels = [ln.get_label() for ln in roofs]
    # int8 counts integer operations: its roof and the axis say GOP/s (issue 27), float16 GFLOP/s
    assert "torch cuda:0 int8 roof (spec: 1.979e+06 GOP/s)" in labels
    assert "torch cuda:0 float16 roof (spec: 9.89e+05 GFLOP/s)" in labels
    assert roof.get_ylabel() == "GFLOP/s (GOP/s for int8)"
    for _, label, ai, gf in roofline_points(report):
        top = max(
            float(__import__("numpy").interp(ai, ln.get_xdata(), ln.get_ydata())) for ln in roofs
        )
        assert gf <= top * 1.001, (label, gf, top)
    # the points carry no text labels that could overlap; the legend names them
    assert not roof.texts
    legend = [t.get_text() for t in roof.get_legend().get_texts()]
    assert "matmul int8" in legend and "matmul float32" in legend


def test_a_recommendation_from_spread_times_is_to_be_confirmed() -> None:
    noisy = _mm("float32", 0.01)
    m = Measurement.from_times("matmul float32", "torch", "cpu", [0.004, 0.01, 0.016, 0.01, 0.02])
    noisy = BenchResult(
        "matmul",
        "float32",
        "torch",
        "cpu",
        512,
        "n",
        measurement=m,
        values={"tflops": 2.0 * 512**3 / m.median / 1e12, "rel_error": 1e-7},
    )
    assert m.too_spread
    fix = _fix([noisy, _mm("float16", 0.0001)])
    assert "varied too much to trust" in fix and "re-run on an idle machine" in fix


def test_compare_does_not_call_a_framework_left_out_not_installed() -> None:
    old = Environment(
        hostname="h", frameworks={"numpy": "2.1.0", "torch": "2.13.0"}, blas="x", threads=2
    )
    numpy_only = Environment(hostname="h", frameworks={"numpy": "2.1.0"}, blas="x", threads=2)
    assert numpy_only.changes_from(old) == ()  # torch was simply not benchmarked this time
    torch_only = Environment(hostname="h", frameworks={"torch": "2.13.0"})
    assert torch_only.changes_from(old) == ()  # neither numpy nor its BLAS was run
    upgraded = Environment(hostname="h", frameworks={"numpy": "2.2.0"}, blas="x", threads=2)
    assert upgraded.changes_from(old) == ("numpy: 2.1.0 → 2.2.0",)


@pytest.mark.parametrize(
    ("n", "says"), [(10_000, "(the note: NumPy 4.12 s"), (4_096, "5.96× this run's work")]
)
def test_doctor_e1_says_when_its_size_is_not_the_notes(n: int, says: str) -> None:
    from _support import DATA
    from gpuprobe.platform.inventory import load
    from gpuprobe.tools.doctor.model import DoctorContext
    from gpuprobe.tools.doctor.rules.kernels import judge_cpu
    from gpuprobe.tools.doctor.worker import WorkerResult

    m = Measurement.from_times(
        "e1-float64", "numpy", "cpu", [1.0] * 3, metadata={"dtype": "float64", "n": n}
    )
    f = next(
        f
        for f in judge_cpu(
            DoctorContext(
                load(DATA / "t4.json"), (WorkerResult("numpy", "cpu", measurements=(m,)),)
            )
        )
        if f.id == "cpu-e1"
    )
    assert says in f.title
    assert (n == 10_000) == any(e.name.startswith("note:") for e in f.evidence)
