"""Each slow example is diagnosed with its problem, and its fixed twin without it."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

pytest.importorskip("torch")

from gpuprobe.core.findings import Status

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
FOUND = (Status.WARN, Status.FAIL, Status.INFO)

CPU_PAIRS = [
    ("item_every_step", "item_fixed", "sync"),
    ("python_loop_mask", "vectorized_mask", "python-loop"),
    ("loader_single_process", "loader_workers", "input-bound"),
]
GPU_PAIRS = [
    ("pageable_copies", "pinned_copies", "pageable-copies"),
    ("fp32_matmul", "tf32_matmul", "no-tensor-cores"),
]


def _run(name: str, tmp_path: Path):
    main = runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="example")["main"]
    return main(str(tmp_path / f"{name}.json.gz"), show=False)


def _check(slow: str, fixed: str, rule: str, tmp_path: Path) -> None:
    bad = _run(slow, tmp_path).finding(rule)
    good = _run(fixed, tmp_path).finding(rule)
    assert bad is not None and bad.status in FOUND, (slow, bad)
    assert good is not None and good.status not in FOUND, (fixed, good)


@pytest.mark.parametrize(("slow", "fixed", "rule"), CPU_PAIRS)
def test_cpu_pair(slow, fixed, rule, tmp_path):
    _check(slow, fixed, rule, tmp_path)


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
