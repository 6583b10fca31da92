"""The compiled-regions finding: torch.compile regions, Triton kernels and CUDA-graph replays on
real traces (HTA's Triton example, TraceLens's torch.compile trace, HTA's trace-diff step with
graph replays), and the warnings (compiling inside the steps, a slow first run, graph breaks) on
traces built to the Kineto schema, since no real trace at hand records them."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprobe.core.findings import Status
from gpuprobe.tools.diagnose.engine import diagnose
from gpuprobe.tools.diagnose.synthetic import KinetoBuilder

from .realdata import DATA, DIFF_TEST, load

TRITON_EXAMPLE = DATA / "hta_triton_example__triton_example.json.gz"
TRACELENS_COMPILE = DATA / "tracelens_torch_compile_triton.json.gz"
TRITON = "triton_poi_fused_add_mul_0"
MM = "ampere_sgemm_128x64_nn"


def _ev(f, name):
    return next(e.value for e in f.evidence if e.name == name)


def test_real_triton_example_runs_one_compiled_region():
    data = load(TRITON_EXAMPLE)
    evs = data["traceEvents"]
    # straight from the JSON: one region (frame 0, first compile), one Triton kernel, the only one
    regions = [e["name"] for e in evs if str(e.get("name")).startswith("Torch-Compiled Region")]
    kernels = [e["name"] for e in evs if e.get("cat") == "kernel"]
    assert regions == ["Torch-Compiled Region: 0/0"]
    assert kernels == ["triton_poi_fused_add_cos_sin_0"]
    f = diagnose(TRITON_EXAMPLE).finding("compiled-regions")
    assert f.status is Status.INFO
    assert f.title == (
        "The step runs compiled code: 1 run of 1 compiled frame; compiler-generated (Triton) "
        "kernels 100.0 % of GPU time"
    )
    assert _ev(f, "compiled_region_runs") == 1 and _ev(f, "frames") == 1
    assert _ev(f, "compiler_kernel_share") == 100.0
    assert _ev(f, "graph_replays") == 0 and _ev(f, "graph_breaks") == 0
    assert _ev(f, "compiling") == 0
    assert f.details == ("frame 0: regions 0/0",)
    assert f.gain is None


def test_real_tracelens_compiled_block_on_mi300():
    data = load(TRACELENS_COMPILE)
    evs = data["traceEvents"]
    kern = [e for e in evs if e.get("cat") == "kernel"]
    triton = sum(e["dur"] for e in kern if e["name"].startswith("triton_"))
    total = sum(e["dur"] for e in evs if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    d = diagnose(TRACELENS_COMPILE)
    f = d.finding("compiled-regions")
    assert f.status is Status.INFO
    assert _ev(f, "compiled_region_runs") == 1
    # Inductor's "## Call CompiledFxGraph ... ##" annotation is its compiled graph's call
    assert _ev(f, "compiled_graph_calls") == 1
    assert _ev(f, "compiler_kernel_share") == pytest.approx(100 * triton / total, abs=0.05)
    # its extern aten::mm calls run inside the compiled graph: no graph break
    assert _ev(f, "graph_breaks") == 0
    # the hipBLASLt GEMMs are bf16 (BBS) MFMA tiles: Tensor (matrix) Cores in use
    assert d.finding("no-tensor-cores").status is Status.OK


def test_real_graph_replays_of_a_compiled_model():
    data = load(DIFF_TEST)
    evs = data["traceEvents"]
    graph_corr = {
        e["args"]["correlation"]
        for e in evs
        if e.get("cat") == "cuda_runtime" and e["name"] == "cudaGraphLaunch"
    }
    gpu = [e for e in evs if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    replayed = sum(e["dur"] for e in gpu if e["args"].get("correlation") in graph_corr)
    calls = sum(1 for e in evs if e.get("name") in ("CompiledFunction", "CompiledFunctionBackward"))
    f = diagnose(DIFF_TEST).finding("compiled-regions")
    assert f.status is Status.INFO
    assert _ev(f, "graph_replays") == len(graph_corr) == 2
    assert _ev(f, "compiled_graph_calls") == calls > 0
    assert _ev(f, "graph_replayed_share") == pytest.approx(
        100 * replayed / sum(e["dur"] for e in gpu), abs=0.05
    )
    assert "2 CUDA-graph replays running" in f.title


def test_eager_trace_has_no_compiled_code(tmp_path: Path):
    b = KinetoBuilder()
    for n in range(3):
        with b.step(n):
            b.launch(MM, kernel_us=300.0, op="aten::mm")
    f = diagnose(b.write(str(tmp_path / "eager.json.gz"))).finding("compiled-regions")
    assert f.status is Status.SKIPPED


def _compiled_step(b: KinetoBuilder, region: str, *, extra_us: float = 0.0) -> None:
    with b.op("TorchDynamo Cache Lookup"):
        pass
    with b.op(region):
        b.cpu(extra_us)
        with b.annotation("## Call CompiledFxGraph f4k3h4sh ##"):
            b.launch(TRITON, kernel_us=200.0, op=TRITON)
            b.launch(MM, kernel_us=400.0, op="aten::mm")


def test_compiling_inside_the_steps_warns_with_its_share(tmp_path: Path):
    b = KinetoBuilder()
    for n in range(4):
        with b.step(n):
            if n == 1:  # a new input shape: dynamo compiles the frame again
                with (
                    b.annotation("_compile.compile_inner (dynamo_timed)"),
                    b.annotation("OutputGraph.call_user_compiler (dynamo_timed)"),
                ):
                    b.cpu(40_000.0)
            _compiled_step(
                b, "Torch-Compiled Region: 0/1" if n >= 1 else "Torch-Compiled Region: 0/0"
            )
            b.sync()
    path = b.write(str(tmp_path / "recompile.json.gz"))
    evs = load(path)["traceEvents"]
    outer = next(e for e in evs if e["name"] == "_compile.compile_inner (dynamo_timed)")
    steps = sum(e["dur"] for e in evs if e["name"].startswith("ProfilerStep#"))
    f = diagnose(path).finding("compiled-regions")
    assert f.status is Status.WARN
    assert f.title.startswith("TorchDynamo/Inductor compiled for 40.0 ms inside the profiled")
    assert _ev(f, "compiling") == pytest.approx(outer["dur"])  # the union: nested spans once
    assert f.gain == pytest.approx(outer["dur"] / steps)
    assert "TORCH_LOGS=recompiles" in f.fix and "mark_dynamic" in f.fix
    assert any("0/0, 0/1" in d and "recompile" in d for d in f.details)


def test_a_far_slower_run_of_a_region_warns(tmp_path: Path):
    b = KinetoBuilder()
    for n in range(5):
        with b.step(n):
            # the first run autotunes (host time inside the region), the others do not
            _compiled_step(b, "Torch-Compiled Region: 0/0", extra_us=30_000.0 if n == 0 else 0.0)
            b.sync()
    path = b.write(str(tmp_path / "slow_first.json.gz"))
    evs = load(path)["traceEvents"]
    runs = sorted(e["dur"] for e in evs if e["name"] == "Torch-Compiled Region: 0/0")
    steps = sum(e["dur"] for e in evs if e["name"].startswith("ProfilerStep#"))
    f = diagnose(path).finding("compiled-regions")
    assert f.status is Status.WARN
    assert f.title.startswith("the first run of Torch-Compiled Region: 0/0 took 30.")
    rest = sorted(runs[:-1])[1:3]  # the median of the four others
    assert f.gain == pytest.approx((runs[-1] - sum(rest) / 2) / steps)


def test_a_graph_break_warns_with_the_eager_ops_between(tmp_path: Path):
    b = KinetoBuilder()
    for n in range(3):
        with b.step(n):
            with b.op("TorchDynamo Cache Lookup"):
                pass
            with b.op("Torch-Compiled Region: 0/0"):
                with b.annotation("## Call CompiledFxGraph aaaa ##"):
                    b.launch(TRITON, kernel_us=200.0, op=TRITON)
                    b.launch(MM, kernel_us=400.0, op="aten::mm")  # extern: compiled, not eager
                # the break: .item() runs eagerly in the frame, then its resume function
                b.item()
                with b.op("TorchDynamo Cache Lookup"):
                    pass
                with (
                    b.op("Torch-Compiled Region: 1/0"),
                    b.annotation("## Call CompiledFxGraph bbbb ##"),
                ):
                    b.launch(TRITON, kernel_us=200.0, op=TRITON)
            b.sync()
    f = diagnose(b.write(str(tmp_path / "break.json.gz"))).finding("compiled-regions")
    assert f.status is Status.WARN
    assert _ev(f, "graph_breaks") == 3
    assert f.title.startswith("3 graph break(s): Torch-Compiled Region: 1/0 ran inside")
    assert "with 3 eager ATen ops" in f.title  # one aten::item per step, the mm not counted
    assert "torch._dynamo.explain" in f.fix and "fullgraph=True" in f.fix
    assert f.gain is None
