"""The README's bench example, run as it is written (issue 41: it read `[0].values  # tflops,
pct_peak, rel_error`, but `[0]` is the 16×16 size, and a CPU has no `pct_peak`): on this CPU
(a real, small bench) and on the H200's recorded report (tests/data/bench/README.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import gpuprobe
from gpuprobe.tools.bench.model import BenchReport

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "bench"


def _example() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    (block,) = [b for b in blocks if "gpuprobe.bench(" in b]
    return block


def _run(bench: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = {"gpuprobe": type("G", (), {"bench": staticmethod(bench)})}
    exec(compile(_example(), "README.md", "exec"), namespace)
    return namespace


def test_on_the_cpu_it_is_the_largest_size_and_has_no_pct_peak() -> None:
    pytest.importorskip("torch")
    asked: dict[str, Any] = {}

    def small_bench(workloads: Any, backends: Any, quick: bool = False) -> BenchReport:
        asked.update(workloads=workloads, backends=backends, quick=quick)
        return gpuprobe.bench(workloads, backends, ["cpu"], quick, sizes={"matmul": [16, 64]},
                              budget_s=0.2, isolate=False, save=False)  # fmt: skip

    ns = _run(small_bench)
    assert asked == {"workloads": ["matmul"], "backends": ["torch"], "quick": True}
    assert ns["largest"].size == 64 and ns["largest"].case == "bfloat16"
    values = ns["largest"].values
    assert set(values) == {"tflops", "rel_error"}  # what the README's comment shows


def test_on_a_gpu_the_values_have_pct_peak_too() -> None:
    h200 = BenchReport.from_dict(json.loads((DATA / "h200-torch.json").read_text()))
    ns = _run(lambda *a, **k: h200)
    sizes = [r.size for r in h200.select("matmul", "bfloat16", ok=True)]
    assert ns["largest"].size == max(sizes) != sizes[0]
    assert {"tflops", "rel_error", "peak", "pct_peak"} <= set(ns["largest"].values)
