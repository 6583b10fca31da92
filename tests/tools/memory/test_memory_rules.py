"""The memory tools' rules have one shape: each is a :class:`~gpuprobe.core.rules.Rule` and emits
only the finding ids it declares, over the results the memory tests build (out-of-memory reports,
batch-size searches, precision sweeps)."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from gpuprobe.core.rules import Rule, undeclared
from gpuprobe.tools.memory import demo
from gpuprobe.tools.memory.fit import fit
from gpuprobe.tools.memory.model import PrecisionReport, PrecisionResult
from gpuprobe.tools.memory.oom.classify import OomError
from gpuprobe.tools.memory.oom.report import OomReport
from gpuprobe.tools.memory.oom.state import GpuHolder, LiveTensor
from gpuprobe.tools.memory.rules import RULES_FIT, RULES_OOM, RULES_PRECISION

GIB = 2**30


@pytest.mark.parametrize("rules", [RULES_OOM, RULES_FIT, RULES_PRECISION])
def test_every_memory_rule_is_a_rule(rules: tuple[Any, ...]) -> None:
    assert rules and all(isinstance(r, Rule) for r in rules)


@pytest.fixture(params=["no CUDA here", "CUDA live here"])
def this_process(request: pytest.FixtureRequest) -> str:
    """Whether torch has initialised CUDA in the test process: on the H200 the xdist worker had
    (other tests had used the card), and explaining a message naming GPU 1 crashed reading GPU 1
    of a one-GPU machine; both ways are run here (the live one faked by ``live_cuda_torch``)."""
    if request.param == "CUDA live here":
        request.getfixturevalue("live_cuda_torch")
    return str(request.param)


def test_oom_rules_emit_only_the_ids_they_declare(fake_nvml: Any, this_process: str) -> None:
    pytest.importorskip("torch")
    from test_memory_oom import (
        CUPY,
        TORCH_CUDA_NEW,
        TORCH_CUDA_OLD,
        _raised,
        _real_cpu_oom,
        _typed,
    )

    from _support import snapshot_dict
    from gpuprobe.tools.memory.oom.explain import explain_oom

    snap = snapshot_dict("t4.json")
    snap["gpus"][0]["processes"] = [
        {"pid": 424242, "used_memory": 4 * GIB, "kind": "compute", "name": "other"}
    ]
    fake_nvml(snap)
    errors = [
        _typed("torch", TORCH_CUDA_NEW),
        _typed("torch", TORCH_CUDA_OLD),
        _typed("cupy.cuda.memory", CUPY),
        MemoryError(),
        _real_cpu_oom(),
        _raised(_typed("torch", TORCH_CUDA_NEW)),
        _raised(RuntimeError(TORCH_CUDA_OLD)),  # GPU 1, which this machine lacks
    ]
    reports = [explain_oom(e, release=False) for e in errors]
    assert all(r.findings for r in reports)
    error = OomError("cuda", "torch", "p", "OutOfMemoryError", "m", requested=GIB, device=0)
    reports.append(
        OomReport(
            error=error,
            allocated=GIB,
            reserved=4 * GIB,
            holders=(GpuHolder(1, "me", 2 * GIB, True), GpuHolder(2, "other", 3 * GIB)),
            gpu_total=16 * GIB,
            cupy_allocated=GIB,
            cupy_reserved=3 * GIB,
            tensors=(LiveTensor((4, 4), "float32", "cuda:0", GIB, True),),
            released=True,
            reserved_after=GIB,
        )
    )
    for r in reports:
        assert undeclared(RULES_OOM, r) == []


def test_fit_rules_emit_only_the_ids_they_declare() -> None:
    results = [
        fit(functools.partial(demo.oom_past, limit=0), range(4, 64), repeats=1),
        fit(functools.partial(demo.oom_past, limit=10**6), [1, 2, 4], repeats=1),
        fit(functools.partial(demo.oom_past, limit=40), range(1, 129), repeats=1),
    ]
    assert {f.id for r in results for f in r.findings} >= {
        "fit-nothing-fits",
        "fit-no-limit",
        "fit-largest",
    }
    for r in results:
        assert undeclared(RULES_FIT, r) == []


def test_precision_rules_emit_only_the_ids_they_declare() -> None:
    def ok(dtype: str, speedup: float, rel_error: float) -> PrecisionResult:
        return PrecisionResult(
            dtype=dtype, outcome="ok", median_s=0.01 / speedup, speedup=speedup, rel_error=rel_error
        )

    results = (
        ok("fp32", 1.0, 0.0),
        ok("bf16", 1.7, 1e-3),
        ok("fp16", 0.5, 1e-3),
        ok("tf32", 1.5, 0.5),
        PrecisionResult(dtype="int8", outcome="error", reason="out of memory: 2 GiB"),
        PrecisionResult(dtype="int8", outcome="error", reason="RuntimeError: no kernel"),
        PrecisionResult(dtype="fp8", outcome="skipped", reason="not on this device"),
    )
    for device in ("cpu", "cuda:0"):
        for recommended in (None, "fp32", "bf16"):
            r = PrecisionReport(device=device, batch=8, results=results, recommended=recommended)
            for flags in (frozenset(), frozenset({"amx_bf16"})):
                assert undeclared(RULES_PRECISION, r, flags) == []
