"""Advice that fits a compiled run (issue 39, cause 11).

A run whose step is compiled already (TorchDynamo regions, AOTAutograd's CompiledFunction,
Inductor's Triton kernels, CUDA-graph replays) is never told to use torch.compile(model): it is
told what applies to it (mode='reduce-overhead' when it does not replay graphs yet, graph breaks
and recompiles, the eager code left between its compiled regions; larger batches and fewer
syncs once on graphs). The one-helper that decides it is rules.compiled.remedy.

Real traces (tests/data/diagnose/SOURCES.md): a V100 step with AOTAutograd's CompiledFunction
and no Triton kernel (HTA), three A100 steps replaying CUDA graphs (HTA), vLLM on a B200 with one
small compiled region (TraceLens), and the other compiled traces of tests/data/diagnose. Every
number asserted is computed here from the JSON.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprobe.core.findings import Status
from gpuprobe.tools.diagnose.engine import diagnose, diagnose_with_context
from gpuprobe.tools.diagnose.rules.compiled import compiled_run, remedy

from . import traces
from .realdata import DATA, load

DF_INDEX = DATA / "hta_df_index_resolver_step3.json.gz"
GRAPHS = DATA / "hta_negative_queue_steps550_552.json.gz"
VLLM_B200 = DATA / "tracelens_b200_vllm_eager.json.gz"
FLUX_CAPTURE = DATA / "tracelens_xdit_flux_capture.json.gz"
COMPILED = (
    DF_INDEX,
    GRAPHS,
    VLLM_B200,
    FLUX_CAPTURE,
    DATA / "hta_triton_example__triton_example.json.gz",
    DATA / "tracelens_torch_compile_triton.json.gz",
    DATA / "hta_trace_diff_test_step1012.json.gz",
    DATA / "tracelens_vllm_decode_graph_capture.json.gz",
)
EAGER_ADVICE = "torch.compile(model)"


def _ev(f, name: str):
    return next(e.value for e in f.evidence if e.name == name)


def _compiled_share(path: Path) -> tuple[int, int]:
    """(kernels launched by compiled code, kernels), by hand: a kernel whose launch call runs
    inside a compiled region or CompiledFunction op on its thread, or inside Inductor's
    CompiledFxGraph annotation, or that a compiler wrote (triton_*), or that a graph launch
    replayed."""
    evs = [e for e in load(path)["traceEvents"] if e.get("ph") == "X"]
    spans = [
        (e["tid"], e["ts"], e["ts"] + e["dur"])
        for e in evs
        if e.get("cat") == "cpu_op"
        and (
            e["name"].startswith("Torch-Compiled Region")
            or e["name"] in ("CompiledFunction", "CompiledFunctionBackward")
        )
    ]
    spans += [
        (None, e["ts"], e["ts"] + e["dur"])
        for e in evs
        if e.get("cat") == "user_annotation" and e["name"].startswith("## Call CompiledFxGraph")
    ]
    launch = {
        e["args"]["correlation"]: e
        for e in evs
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    kernels = [e for e in evs if e.get("cat") == "kernel"]
    n = 0
    for k in kernels:
        rt = launch.get(k["args"].get("correlation"))
        replayed = rt is not None and "GraphLaunch" in rt["name"]
        inside = rt is not None and any(
            (tid is None or tid == rt["tid"]) and a <= rt["ts"] < b for tid, a, b in spans
        )
        n += k["name"].startswith("triton_") or replayed or inside
    return n, len(kernels)


# -- cause 11: the advice fits the run ---------------------------------------------------------


@pytest.mark.parametrize("path", COMPILED, ids=lambda p: p.name)
def test_no_compiled_run_is_told_to_use_torch_compile(path: Path):
    d, ctx = diagnose_with_context(path)
    assert compiled_run(ctx).any
    for f in d.findings:
        assert EAGER_ADVICE not in f.fix, (f.id, f.fix)


def test_a_compiled_step_without_graphs_is_told_cuda_graphs_and_breaks():
    # AOTAutograd's CompiledFunction (forward and backward) launches most of the step's
    # kernels, all of them ATen's (no Triton kernel: a backend that does not fuse)
    compiled, kernels = _compiled_share(DF_INDEX)
    assert kernels == 3874 and compiled / kernels > 0.5
    d, ctx = diagnose_with_context(DF_INDEX)
    run = compiled_run(ctx)
    assert (run.compiled_kernels, run.kernels) == (compiled, kernels)
    assert run.compiled and not run.graphs and not run.compiler_kernels
    f = d.finding("launch-bound")
    assert f.status is Status.INFO  # the GPU is busy most of the step
    share = round(100 * compiled / kernels, 1)
    assert f.fix.startswith(f"the step is compiled already ({share} % of its kernels")
    assert "mode='reduce-overhead'" in f.fix and "mode='max-autotune'" in f.fix
    assert "TORCH_LOGS=recompiles,graph_breaks" in f.fix and "torch._dynamo.explain" in f.fix
    assert f"{round(100 - share, 1)} % of the kernels still launch eagerly" in f.fix
    assert "no Triton kernel ran" in f.fix and "backend='inductor'" in f.fix
    assert _ev(d.finding("compiled-regions"), "compiled_kernel_share") == share


def test_a_run_on_cuda_graphs_is_told_batches_and_syncs():
    evs = load(GRAPHS)["traceEvents"]
    graph_launches = sum(1 for e in evs if e.get("name") == "cudaGraphLaunch")
    assert graph_launches == 42  # 14 replays in each of the three steps
    d, ctx = diagnose_with_context(GRAPHS)
    run = compiled_run(ctx)
    assert run.graphs and run.graph_launches == graph_launches
    f = d.finding("host-work")
    assert f.status is Status.INFO
    assert "The step replays CUDA graphs already (14 per step)" in f.fix
    assert "take host syncs out of the step" in f.fix and "larger batch" in f.fix
    assert "replay the step as a CUDA graph" not in f.fix
    assert remedy(ctx, "launch").startswith("the step already replays CUDA graphs (14 per step")


def test_a_run_with_a_little_compiled_code_is_told_to_compile_the_rest():
    # vLLM on a B200 with CUDA graphs off: one compiled region with a tiny Triton kernel, the
    # model's 768 kernels launched eagerly, the GPU waiting for launches most of the window
    compiled, kernels = _compiled_share(VLLM_B200)
    assert (compiled, kernels) == (1, 768)
    d = diagnose(VLLM_B200)
    f = d.finding("launch-bound")
    assert f.status is Status.WARN and d.headline is f
    assert f.fix.startswith(
        f"only {round(100 * compiled / kernels, 1)} % of the step's kernels come from "
        "compiled code: compile the code that launches the others too"
    )
    assert EAGER_ADVICE not in f.fix
    assert "compile the code that runs eagerly (99.9 % of the kernels)" in d.finding("gpu-idle").fix


def test_an_eager_run_keeps_the_torch_compile_advice(tmp_path: Path):
    d = diagnose(traces.launch_bound(str(tmp_path / "eager.json.gz")))
    f = d.finding("launch-bound")
    assert f.status is Status.WARN
    assert "fuse ops with torch.compile(model)" in f.fix
    assert d.finding("compiled-regions").status is Status.SKIPPED
