"""The compiled-regions finding: torch.compile regions, Triton kernels and CUDA-graph replays on
real traces (HTA's Triton example, TraceLens's torch.compile trace, HTA's trace-diff step with
graph replays), and what it says of compiling inside the steps (one-time when once, a warning
when in most steps), a slow run of a region (one-time) and graph breaks (a warning) on traces
built to the Kineto schema and on a real first pass that compiles (xDiT's Flux on an MI300X,
TraceLens): a compiled run's first pass is a one-time cost (one-time-start), not steady
launch-bound or untraced host time (issue 39, cause 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprobe.core.findings import Status
from gpuprobe.tools.diagnose.engine import diagnose, diagnose_with_context
from gpuprobe.tools.diagnose.synthetic import KinetoBuilder

from .realdata import DATA, DIFF_TEST, load

TRITON_EXAMPLE = DATA / "hta_triton_example__triton_example.json.gz"
FLUX_CAPTURE = DATA / "tracelens_xdit_flux_capture.json.gz"
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
        "kernels 100.0 % of GPU time; 100.0 % of the kernels launched by compiled code"
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


def test_compiling_inside_one_step_is_a_one_time_cost(tmp_path: Path):
    b = KinetoBuilder()
    for n in range(4):
        with b.step(n):
            if n == 1:  # a new input shape: dynamo compiles the frame again, once
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
    d = diagnose(path)
    f = d.finding("compiled-regions")
    assert f.status is Status.INFO and f.gain is None
    assert f.title.startswith(
        "TorchDynamo/Inductor compiled for 40.0 ms inside the profiled steps "
        f"({100 * outer['dur'] / steps:.1f} % of them): a first pass's one-time cost"
    )
    assert _ev(f, "compiling") == pytest.approx(outer["dur"])  # the union: nested spans once
    assert _ev(f, "compiling_recurs") is False
    assert "TORCH_LOGS=recompiles" in f.fix and "mark_dynamic" in f.fix
    assert any("0/0, 0/1" in d and "recompile" in d for d in f.details)
    # its GPU idle is one-time start-up, set apart: step 1 is steady again without it
    one = d.finding("one-time-start")
    assert "the largest: compiling (TorchDynamo/Inductor), 40.0 ms" in one.title
    row = d.steps[1]
    assert row.idle_cause_us["startup"] == pytest.approx(outer["dur"], rel=0.01)
    assert d.finding("untraced-host").status is Status.OK
    assert not d.cold  # three steady steps beside it


def test_a_far_slower_first_run_of_a_region_makes_a_warm_up_step(tmp_path: Path):
    b = KinetoBuilder()
    for n in range(5):
        with b.step(n):
            # the first run autotunes (host time inside the region), the others do not
            _compiled_step(b, "Torch-Compiled Region: 0/0", extra_us=30_000.0 if n == 0 else 0.0)
            b.sync()
    path = b.write(str(tmp_path / "slow_first.json.gz"))
    evs = load(path)["traceEvents"]
    runs = sorted(e["dur"] for e in evs if e["name"] == "Torch-Compiled Region: 0/0")
    d = diagnose(path)
    one = d.finding("one-time-start")
    rest = sorted(runs[:-1])[1:3]  # the median of the four others
    assert (
        "the largest: the first run of Torch-Compiled Region: 0/0 (its other 4: "
        f"{sum(rest) / 2 / 1000:.2f} ms median), {runs[-1] / 1000:.1f} ms" in one.title
    )
    assert "step #0 left out as warm-up" in one.title
    assert [s.step for s in d.steps] == [1, 2, 3, 4]
    f = d.finding("compiled-regions")
    assert f.status is Status.INFO and f.gain is None


def test_a_far_slower_run_later_on_is_one_time_too(tmp_path: Path):
    b = KinetoBuilder()
    for n in range(5):
        with b.step(n):
            _compiled_step(b, "Torch-Compiled Region: 0/0", extra_us=30_000.0 if n == 2 else 0.0)
            b.sync()
    path = b.write(str(tmp_path / "slow_later.json.gz"))
    evs = load(path)["traceEvents"]
    slow = max(e["dur"] for e in evs if e["name"] == "Torch-Compiled Region: 0/0")
    d = diagnose(path)
    f = d.finding("compiled-regions")
    assert f.status is Status.INFO and f.gain is None
    assert f.title.startswith("one run of Torch-Compiled Region: 0/0 took 30.0 ms")
    assert d.steps[2].idle_cause_us["startup"] == pytest.approx(slow, rel=0.01)
    gpu_idle = d.finding("gpu-idle")
    assert gpu_idle.status is Status.OK


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


# -- a compiled run's first pass is a one-time cost (issue 39, cause 7) -------------------------


def _union(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def test_compiling_inside_the_window_is_a_cold_start_not_a_warning():
    evs = load(FLUX_CAPTURE)["traceEvents"]
    compiling = _union(
        [
            (e["ts"], e["ts"] + e["dur"])
            for e in evs
            if e.get("ph") == "X" and e["name"].endswith("(dynamo_timed)")
        ]
    )
    assert compiling == pytest.approx(243_304, abs=1)  # µs of TorchDynamo/Inductor compiling
    d = diagnose(FLUX_CAPTURE)
    assert d.cold
    one = d.finding("one-time-start")
    assert d.headline is one and one.status is Status.WARN
    assert "the largest: compiling (TorchDynamo/Inductor), 243.3 ms" in one.title
    assert _ev(one, "one_time_host_time") == pytest.approx(compiling + 1981.0, abs=2)
    f = d.finding("compiled-regions")
    assert f.status is Status.INFO and f.gain is None  # was a warning, the headline, 58 %
    assert f.title.startswith("TorchDynamo/Inductor compiled for 243.3 ms inside the profiled")
    assert "one-time cost, set apart from the steady-state verdicts" in f.title
    assert not any(x.status is Status.WARN for x in d.findings if x is not one)


def test_a_first_runs_stalls_are_one_time_not_launch_bound(tmp_path: Path):
    # one profiled step of a compiled block called 8 times (per layer); its first call stalls
    # 600 µs with nothing traced before each kernel (loading it on first use), gaps short enough
    # to look like launch overhead; the other calls launch back to back
    b = KinetoBuilder()
    with b.step(1):
        for call in range(8):
            with b.op("TorchDynamo Cache Lookup"):
                pass
            with b.op("Torch-Compiled Region: 1/0"):
                for _ in range(20):
                    if call == 0:
                        b.cpu(600.0)
                    b.launch(TRITON, kernel_us=50.0, op=TRITON)
        b.sync()
    path = b.write(str(tmp_path / "first_run.json.gz"))
    evs = load(path)["traceEvents"]
    runs = [e["dur"] for e in evs if e["name"] == "Torch-Compiled Region: 1/0"]
    step = next(e["dur"] for e in evs if e["name"] == "ProfilerStep#1")
    assert runs[0] > 12_000 and max(runs[1:]) < 1_200
    d = diagnose(path)
    (row,) = d.steps
    # the first run's idle (its length less its 20 kernels' 50 µs) is start-up, no longer
    # waiting for launches
    assert row.idle_cause_us["startup"] == pytest.approx(runs[0] - 20 * 50.0, rel=0.01)
    assert row.idle_cause_us.get("launch", 0.0) < 0.05 * step
    assert d.finding("launch-bound").status is Status.OK
    one = d.finding("one-time-start")
    assert "the first run of Torch-Compiled Region: 1/0" in one.title
    assert d.cold and d.headline is one  # most of the one step is the first run


def test_compiling_in_every_step_is_a_steady_cost(tmp_path: Path):
    # a shape that changes every step: dynamo compiles the frame again in each of them
    b = KinetoBuilder()
    for n in range(4):
        with b.step(n):
            with b.annotation("_compile.compile_inner (dynamo_timed)"):
                b.cpu(10_000.0)
            _compiled_step(b, f"Torch-Compiled Region: 0/{n}")
            b.sync()
    path = b.write(str(tmp_path / "recompiles.json.gz"))
    evs = load(path)["traceEvents"]
    compiling = sum(e["dur"] for e in evs if e["name"].endswith("(dynamo_timed)"))
    d, ctx = diagnose_with_context(path)
    assert ctx.one_time_spans.size == 0  # not one-time: it recurs
    f = d.finding("compiled-regions")
    assert f.status is Status.WARN
    assert f.title.endswith("in most of the steps: recompiles, a steady cost")
    steps = sum(e["dur"] for e in evs if e["name"].startswith("ProfilerStep#"))
    assert f.gain == pytest.approx(compiling / steps, rel=0.01)
    assert "TORCH_LOGS=recompiles" in f.fix and "mark_dynamic" in f.fix
    assert not d.cold
