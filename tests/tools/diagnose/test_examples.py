"""Each slow example is diagnosed with its problem, and its fixed twin without it."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from gpuprobe.core.findings import Finding, Status
from gpuprobe.tools.diagnose.model import Diagnosis
from gpuprobe.tools.diagnose.rules.gpu_time import LAUNCH_IDLE_WARN_FRACTION

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
FOUND = (Status.WARN, Status.FAIL, Status.INFO)

CPU_PAIRS = [
    ("item_every_step", "item_fixed", "sync"),
    ("python_loop_mask", "vectorized_mask", "python-loop"),
]
GPU_PAIRS = [
    ("pageable_copies", "pinned_copies", "pageable-copies"),
    ("fp32_matmul", "tf32_matmul", "no-tensor-cores"),
]


def _example(name: str) -> dict[str, Any]:
    """The example's module globals (its ``main`` and its constants)."""
    return runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="example")


def _run(name: str, tmp_path: Path) -> Diagnosis:
    return _example(name)["main"](str(tmp_path / f"{name}.json.gz"), show=False)


def _evidence(finding: Finding, name: str) -> Any:
    return next(e.value for e in finding.evidence if e.name == name)


def _check(slow: str, fixed: str, rule: str, tmp_path: Path) -> None:
    bad = _run(slow, tmp_path).finding(rule)
    good = _run(fixed, tmp_path).finding(rule)
    assert bad is not None and bad.status in FOUND, (slow, bad)
    assert good is not None and good.status not in FOUND, (fixed, good)


@pytest.mark.parametrize(("slow", "fixed", "rule"), CPU_PAIRS)
def test_cpu_pair(slow, fixed, rule, tmp_path):
    _check(slow, fixed, rule, tmp_path)


def test_loader_pair_judged_in_the_steady_state(tmp_path):
    """The single-process loader is input-bound; its fixed twin is not, judged on steps past the
    batches its workers make ahead at start-up. The H200 showed why that matters: the former
    twin looked healthy in its steps 2..4 (input 4.6 %) only because they ate those batches:
    its 2 workers made a batch per ~7.5 ms (64 images x 0.23 ms of CPU each) for a ~3 ms step,
    and beside a busy test suite its steps 2..4 already waited 79 % for the DataLoader."""
    ex = _example("loader_single_process")  # both twins share its loader sizes and schedule
    prefetched = ex["WORKERS"] * ex["PREFETCH"]
    slow, fixed = _run("loader_single_process", tmp_path), _run("loader_workers", tmp_path)
    for diagnosis in (slow, fixed):
        analysed = [s.step for s in diagnosis.steps]
        assert len(analysed) == ex["ACTIVE"], analysed
        assert all(n is not None and n >= 2 * prefetched for n in analysed), analysed
    bad, good = slow.finding("input-bound"), fixed.finding("input-bound")
    assert bad is not None and bad.status is Status.WARN, bad
    assert _evidence(bad, "num_workers") == 0
    assert good is not None and good.status is Status.OK, good
    assert _evidence(good, "num_workers") == ">0"


@pytest.mark.gpu
def test_loader_workers_keep_the_gpu_busy(tmp_path):
    """On a GPU the fixed loader's step is the GPU's: not input-bound, and not launch-bound
    either (the H200 showed the former twin launch-bound: 54 kernels of 7.5 µs per step, the
    GPU busy 23 %)."""
    d = _run("loader_workers", tmp_path)
    found = {f.id: f for f in d.findings}
    assert found["input-bound"].status is Status.OK, found["input-bound"]
    assert found["gpu-idle"].status is Status.OK, found["gpu-idle"]
    waits = _evidence(found["launch-bound"], "gpu_waits_for_launch")
    assert found["launch-bound"].status is not Status.WARN, found["launch-bound"]
    assert waits is not None and waits < 100 * LAUNCH_IDLE_WARN_FRACTION, found["launch-bound"]


@pytest.mark.gpu
@pytest.mark.parametrize(("slow", "fixed", "rule"), GPU_PAIRS)
def test_gpu_pair(slow, fixed, rule, tmp_path):
    _check(slow, fixed, rule, tmp_path)


def test_gpu_examples_say_they_need_cuda(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("has CUDA")
    for slow, fixed, _ in GPU_PAIRS:
        for name in (slow, fixed):
            with pytest.raises(SystemExit, match="needs a CUDA GPU"):
                _run(name, tmp_path)
