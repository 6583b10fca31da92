"""benchmarks/gpu_sweep_lstsq.py's arithmetic, checked here on what the H200 recorded: the flop
counts, the fractions of both fp64 peaks, the goal, and the prediction from ceilings.

The numbers are from the sweep's ``scale-lstsq.json`` on an NVIDIA H200 (2026-11-25, issue 30):
``gpuprobe.lstsq(method="normal")`` on a 1,000,000 × 1024 CuPy array through a one-worker
dask-cuda cluster, solve_s 1.0028575979999914, 2 passes over A, useful 1.0517146223984724 TFLOP/s,
executed 2.0973027518509344, DGEMM of a 16,129-row block 52.90705937014936.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from _support import too_wide

ROOT = Path(__file__).resolve().parents[3]
H200_SOLVE_S = 1.0028575979999914
H200_USEFUL = 1.0517146223984724
H200_EXECUTED = 2.0973027518509344
H200_PEAKS = {"fp64": 34, "fp64_tensor": 67}


@pytest.fixture(scope="module")
def bench() -> Any:
    spec = importlib.util.spec_from_file_location(
        "gpu_sweep_lstsq", ROOT / "benchmarks" / "gpu_sweep_lstsq.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_sweep_lstsq"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_flop_counts_reproduce_the_h200_record(bench):
    old = bench.flops(1_000_000, 1024, 2, triangle=False)  # the Dask path: full GEMMs
    assert old["useful"] / H200_SOLVE_S / 1e12 == pytest.approx(H200_USEFUL, rel=1e-12)
    assert old["executed"] / H200_SOLVE_S / 1e12 == pytest.approx(H200_EXECUTED, rel=1e-12)
    new = bench.flops(1_000_000, 1024, 2, triangle=True)  # one GPU: triangular panels
    assert new["useful"] == old["useful"]
    gram = 0.625 * 2 * 1_000_000 * 1024**2  # 4 panels: 5/8 of a full GEMM
    assert new["executed"] == pytest.approx(gram + 6 * 1_000_000 * 1024)


def test_rates_against_both_peaks(bench):
    got = bench.fractions({"useful_tflops": H200_USEFUL, "solve_s": 1.0}, H200_PEAKS)
    assert got == {
        "useful_vs_fp64": pytest.approx(0.030932783011719776),
        "useful_vs_fp64_tensor": pytest.approx(0.015697233170126453),
    }
    assert bench.fractions({"dgemm_tflops": 52.9}, {"fp64": 34, "fp64_tensor": None}) == {
        "dgemm_vs_fp64": pytest.approx(52.9 / 34)
    }


def test_goal_is_judged_on_the_fp64_peak(bench):
    was = bench.judge(H200_USEFUL, H200_PEAKS)
    assert was["met"] is False and was["fraction"] == pytest.approx(0.0309, abs=1e-4)
    assert was["target"] == 0.6 and "fp64 peak (34 TFLOP/s)" in was["judged"]
    # 0.6 × 34 = 20.4 TFLOP/s useful: the line
    assert bench.judge(20.5, H200_PEAKS)["met"] is True
    assert bench.judge(20.3, H200_PEAKS)["met"] is False
    assert bench.judge(30.0, {"fp64": None})["met"] is None  # a card without a spec


def test_prediction_adds_up_its_parts(bench):
    est = bench.predict(1_000_000, 1024, 2, 52.9, 4080.0, 0.005)
    assert est["gram_s"] == pytest.approx(0.625 * 2 * 1e6 * 1024**2 / 52.9e12)
    assert est["gemv_s"] == pytest.approx(3 * 8 * 1e6 * 1024 / 4080e9)  # Aᵀb, then Ax and Aᵀr
    assert est["solve_s"] == pytest.approx(est["gram_s"] + est["gemv_s"] + 0.005)
    useful = bench.flops(1_000_000, 1024, 2, True)["useful"]
    assert est["useful_tflops"] == pytest.approx(useful / est["solve_s"] / 1e12)
    # 25 + 6 + 5 ms: about 30 TFLOP/s useful, 0.88 of the fp64 peak
    assert 0.85 < bench.judge(est["useful_tflops"], H200_PEAKS)["fraction"] < 0.92


def test_check_runs_without_a_card(bench, tmp_path, capsys):
    assert bench.main(["--check", "--out", str(tmp_path / "out.json")]) == 0
    got = json.loads((tmp_path / "out.json").read_text())
    assert got["check"] == "ok" and got["goal"]["target"] == 0.6
    # the 2026-11-26 card's Gram (25.5 ms at 51.4 TFLOP/s executed) and its other 7.5 ms kept;
    # the n × n work as assumed for the factor on the card
    est = got["h200_estimate"]
    assert est["gram_s"] == pytest.approx(0.0255, abs=1e-4)
    assert est["host_s"] == bench.H200_HOST_DENSE_S
    assert est["solve_s"] == pytest.approx(0.0255 + 0.0055 + 0.008 + 0.0075, abs=3e-4)
    assert too_wide(capsys.readouterr().out) == []
