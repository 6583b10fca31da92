"""Over which span the GPU busy share is taken: the analysed steps' GPU span (the existing
figure, ``steps_busy_fraction``) and the whole GPU span (``trace_gpu_busy_fraction``), with the
GPU activities launched outside the steps counted, on real traces. Every expected number is
computed here from the trace's events as plain json reads them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from gpuprobe import cli
from gpuprobe.tools.diagnose.engine import diagnose

from .realdata import DATA, length, union

H200 = DATA / "gpu_h200"
V100 = DATA / "kineto_r50_nw0_a.pt.trace.json.gz"
# kineto's tb_plugin sample of Jan 2021 (a bare JSON list): 88 of its 9,927 GPU activities ran
# before the first profiled step, launched before the profiler started (no launch call in the
# trace); in the corpus (../shared/traces), not in this repository
CORPUS = Path(__file__).resolve().parents[4] / "shared" / "traces"
R50_JAN = CORPUS / "kineto_r50_nw0_2021jan.pt.trace.json.gz"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset")  # and 2021's
GPU_STEP = "gpu_user_annotation"
RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "Runtime", "hip_runtime", "hip_driver")


def _events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as f:
        data = json.load(f)
    return data if isinstance(data, list) else data["traceEvents"]


def _expected(path: Path) -> dict[str, float]:
    """The figures from the raw events: each GPU activity's step is the ProfilerStep (the
    longest of each number) its launch call ran in, by correlation id (its own start without
    a launch); busy is the plain union of [ts, ts + dur)."""
    evs = [e for e in _events(path) if e.get("ph") == "X"]
    steps: dict[str, tuple[float, float]] = {}
    for e in evs:
        # the host's steps (the GPU's copies, gpu_user_annotation, are not steps)
        if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") != GPU_STEP:
            s, d = float(e["ts"]), float(e.get("dur", 0))
            old = steps.get(e["name"])
            if old is None or d > old[1] - old[0]:
                steps[e["name"]] = (s, s + d)
    launch = {
        e["args"]["correlation"]: float(e["ts"])
        for e in evs
        if e.get("cat") in RUNTIME_CATS and "correlation" in e.get("args", {})
    }
    gpu = [e for e in evs if e.get("cat") in GPU_CATS]
    inside, every = [], []
    outside = 0
    for e in gpu:
        iv = (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        every.append(iv)
        t = launch.get(e.get("args", {}).get("correlation"), iv[0])
        if any(a <= t <= b for a, b in steps.values()):
            inside.append(iv)
        else:
            outside += 1
    u_in, u_all = union(inside), union(every)
    span_in = u_in[-1][1] - u_in[0][0]
    span_all = u_all[-1][1] - u_all[0][0]
    return {
        "steps_busy": length(u_in) / span_in,
        "steps_span": span_in,
        "trace_busy": length(u_all) / span_all,
        "trace_span": span_all,
        "outside": outside,
        "outside_busy": length(u_all) - length(u_in),
    }


@pytest.mark.parametrize(
    ("path", "outside"),
    [
        (H200 / "fp32_matmul.json.gz", 3),  # no launch in the trace, run after the last step
        (H200 / "loader_workers.json.gz", 1),  # a layout kernel running as the first step began
        (V100, 0),
        (R50_JAN, 88),
    ],
    ids=["fp32_matmul", "loader_workers", "r50_nw0_v100", "r50_nw0_2021jan"],
)
def test_busy_over_the_steps_and_over_the_whole_gpu_span(path: Path, outside: int) -> None:
    if not path.exists():
        pytest.skip(f"{path.name} is in the corpus (../shared/traces), not here")
    want = _expected(path)
    s = diagnose(path).summary
    assert s.gpu_activities_outside_steps == want["outside"] == outside
    # the existing figure, under its old name and its new one
    assert s.steps_busy_fraction == s.gpu_busy_fraction
    assert s.steps_busy_fraction == pytest.approx(want["steps_busy"], abs=1e-6)
    assert s.gpu_span_us == pytest.approx(want["steps_span"], abs=0.01)
    assert s.trace_gpu_span_us == pytest.approx(want["trace_span"], abs=0.01)
    assert s.trace_gpu_busy_fraction == pytest.approx(want["trace_busy"], abs=1e-6)
    assert s.gpu_busy_outside_steps_us == pytest.approx(want["outside_busy"], abs=0.01)
    if not outside:
        assert s.trace_gpu_span_us == s.gpu_span_us
        assert s.trace_gpu_busy_fraction == s.gpu_busy_fraction


def test_the_two_figures_of_the_2021_v100_sample() -> None:
    """kineto's Jan 2021 ResNet50 sample: 49.9 % over the steps, 50.3 % over the whole span."""
    if not R50_JAN.exists():
        pytest.skip("kineto_r50_nw0_2021jan is in the corpus (../shared/traces), not here")
    s = diagnose(R50_JAN).summary
    assert round(100 * s.steps_busy_fraction, 1) == 49.9
    assert round(100 * s.trace_gpu_busy_fraction, 1) == 50.3
    assert s.gpu_span_us == 1_282_944.0 and s.trace_gpu_span_us == 1_292_150.0
    assert s.gpu_busy_outside_steps_us == 9_056.0


def test_json_carries_both_spans_and_the_text_names_them(capsys) -> None:
    path = H200 / "fp32_matmul.json.gz"
    want = _expected(path)
    assert cli.main(["diagnose", str(path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    for key in ("gpu_busy_fraction", "gpu_span_us", "steps_busy_fraction", "trace_gpu_span_us"):
        assert key in summary
    assert summary["gpu_activities_outside_steps"] == 3
    assert summary["trace_gpu_busy_fraction"] == pytest.approx(want["trace_busy"], abs=1e-6)
    assert cli.main(["diagnose", str(path)]) in (0, 1)
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    flat = " ".join(line.strip() for line in lines)
    assert (
        f"Steps' GPU span (HTA's definitions): GPU busy {100 * want['steps_busy']:.1f} % of "
        f"{want['steps_span']:,.0f} µs, from the first to the last GPU activity launched in "
        "steps 2..4;"
    ) in flat
    assert (
        f"Whole GPU span: GPU busy {100 * want['trace_busy']:.1f} % of "
        f"{want['trace_span']:,.0f} µs, counting 3 GPU activities launched outside steps 2..4 "
        f"({want['outside_busy']:,.0f} µs of busy time only they account for)"
    ) in flat


def test_no_whole_span_line_when_every_activity_is_in_the_steps(capsys) -> None:
    assert cli.main(["diagnose", str(V100)]) in (0, 1)
    text = capsys.readouterr().out
    assert "Steps' GPU span (HTA's definitions): GPU busy 60.6 % of 996,477 µs" in text
    assert "Whole GPU span" not in text
