"""The rules on real traces the project had not seen when the rules were written (found for
benchmarks/results/diagnose_unseen.md; origins in tests/data/diagnose/SOURCES.md). Each expected
number is also computed here straight from the JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuprobe.core.findings import Status
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.engine import diagnose
from gpuprobe.tools.diagnose.kernels import launch_stats
from gpuprobe.tools.diagnose.kineto import read_trace
from gpuprobe.tools.diagnose.synthetic import KinetoBuilder

from .realdata import DATA, gpu_events, load

# HF video classification pipeline on an H100: ~218 ms of video decoding and image preprocessing
# on the host before the first kernel; a cudaDeviceSynchronize at the step's start, while the GPU
# is idle, that waits 14 µs
TIMESFORMER = DATA / "tracelens_h100_timesformer_step6.json.gz"


def _step_and_sync(data: dict) -> tuple[dict, dict]:
    evs = data["traceEvents"]
    (step,) = [
        e for e in evs if e.get("name") == "ProfilerStep#6" and e.get("cat") == "user_annotation"
    ]
    (sync,) = [e for e in evs if e.get("name") == "cudaDeviceSynchronize"]
    return step, sync


def test_a_sync_while_the_gpu_is_idle_does_not_own_the_idle_time_after_it():
    data = load(TIMESFORMER)
    step, sync = _step_and_sync(data)
    gpu = sorted(gpu_events(data), key=lambda e: e["ts"])
    # straight from the JSON: nothing ran on the GPU during the sync, and the first GPU work of
    # the step starts ~218 ms after the step began
    assert not any(
        g["ts"] < sync["ts"] + sync["dur"] and g["ts"] + g["dur"] > sync["ts"] for g in gpu
    )
    before_first = gpu[0]["ts"] - step["ts"]
    assert before_first > 200_000

    d = diagnose(TIMESFORMER)
    (row,) = d.steps
    # the wait before the first kernel is host work (preprocessing), not the sync's refill
    assert row.idle_cause_us["host"] >= before_first - sync["dur"] - 1.0
    assert row.idle_cause_us["sync"] < 1_000.0
    assert sum(row.idle_cause_us.values()) == pytest.approx(row.idle_us, rel=1e-6)
    assert d.finding("sync").status is Status.INFO
    # the idle time is host-work's, priced by its replay; gpu-idle is its symptom
    host = d.finding("host-work")
    assert host.status is Status.WARN and d.headline is host
    assert host.gain == pytest.approx(row.idle_cause_us["host"] / row.duration_us, abs=0.01)
    idle = d.finding("gpu-idle")
    assert idle.status is Status.INFO and idle.gain is None
    assert "before the step's first kernel" in idle.title
    explained = next(e.value for e in idle.evidence if e.name == "explained_by_findings")
    assert explained == pytest.approx(100 * host.gain, abs=0.1)
    share = next(e.value for e in idle.evidence if e.name == "idle_host")
    assert share > 95.0


def test_a_sync_that_drains_queued_work_still_owns_the_refill(tmp_path):
    # the same refill rule on the case it is for: the host waits for queued kernels, then takes
    # 400 µs to launch the next one; the GPU idles those 400 µs because of the sync
    b = KinetoBuilder()
    for n in (1, 2, 3):
        with b.step(n):
            for _ in range(20):
                b.launch("void gemm_kernel", kernel_us=50.0, op="aten::mm")
            b.sync("cudaDeviceSynchronize")
            b.cpu(400.0)
            for _ in range(20):
                b.launch("void gemm_kernel", kernel_us=50.0, op="aten::mm")
    d = diagnose(b.write(str(tmp_path / "drain.json")))
    assert all(r.idle_cause_us["sync"] >= 400.0 for r in d.steps)
    assert d.finding("sync").status is Status.WARN


def _layer_trace(path: Path, layers: int, ops_per_layer: int) -> str:
    """One step of a model whose ``forward`` (a path the profiler wrote relative to sys.path,
    like ``transformers/...``) runs ``ops_per_layer`` slices, once per layer."""
    b = KinetoBuilder()
    with b.step(1), b.python("run.py(10): main"):
        for i in range(layers):
            with (
                b.python(f"nn.Module: Layer_{i}"),
                b.python("torch/nn/modules/module.py(1750): _call_impl"),
                b.python("mylib/models/net.py(320): forward"),
            ):
                for _ in range(ops_per_layer):
                    with b.op("aten::slice", self_us=1.5):
                        pass
                b.launch("void gemm_kernel", kernel_us=50.0, op="aten::mm")
    return b.write(str(path))


def test_ops_of_a_module_forward_repeated_per_layer_are_not_a_python_loop(tmp_path):
    # 12 layers x 13 slices = 156 per step from one line, but never more than 13 in one call
    d = diagnose(_layer_trace(tmp_path / "layers.json", 12, 13))
    assert d.finding("python-loop").status is Status.OK


def test_a_loop_inside_one_module_forward_is_still_a_python_loop(tmp_path):
    d = diagnose(_layer_trace(tmp_path / "loop.json", 2, 150))
    f = d.finding("python-loop")
    assert f.status is Status.WARN
    assert next(e.value for e in f.evidence if e.name == "repeats_per_step") == 150
    assert next(e.value for e in f.evidence if e.name == "frame") == (
        "mylib/models/net.py(320): forward"
    )


def test_real_transformer_layers_are_not_reported_as_a_python_loop():
    data = load(TIMESFORMER)
    line = "transformers/models/timesformer/modeling_timesformer.py(320): forward"
    calls = [e for e in data["traceEvents"] if e.get("name") == line]
    slices = [
        e
        for e in data["traceEvents"]
        if e.get("name") == "aten::slice"
        and any(c["ts"] <= e["ts"] <= c["ts"] + c["dur"] for c in calls)
    ]
    # straight from the JSON: 12 layers, 156 slices in all, 13 in each call of that forward
    assert len(calls) == 12
    assert len(slices) == 156
    d = diagnose(TIMESFORMER)
    assert d.finding("python-loop").status is Status.OK


# vLLM (ROCm, MI300-class card) capturing its decode CUDA graph: 421 kernel launches between
# hipStreamBeginCapture and hipStreamEndCapture, 10 GPU activities in the whole window
CAPTURE = DATA / "tracelens_vllm_decode_graph_capture.json.gz"
_LAUNCH = ("hipLaunchKernel", "hipModuleLaunchKernel", "hipExtModuleLaunchKernel")


def test_a_profile_of_graph_capture_is_not_judged_launch_bound():
    evs = load(CAPTURE)["traceEvents"]
    (begin,) = [e for e in evs if e.get("name") == "hipStreamBeginCapture"]
    (end,) = [e for e in evs if e.get("name") == "hipStreamEndCapture"]
    lo, hi = begin["ts"], end["ts"] + end["dur"]
    launches = [e for e in evs if e.get("name") in _LAUNCH]
    captured = [e for e in launches if lo <= e["ts"] <= hi]
    gpu = gpu_events(load(CAPTURE))
    # straight from the JSON: 55 ms of capture in which the GPU runs only the tail of one
    # kernel launched before it began
    assert len(captured) == 421 and len(launches) == 428
    assert hi - lo > 50_000
    inside = sum(max(0.0, min(hi, g["ts"] + g["dur"]) - max(lo, g["ts"])) for g in gpu)
    assert inside < 10.0

    d = diagnose(CAPTURE)
    for fid in ("gpu-idle", "launch-bound", "sync"):
        f = d.finding(fid)
        assert f.status is Status.SKIPPED, fid
        assert "CUDA-graph capture" in f.title
        assert next(e.value for e in f.evidence if e.name == "captured_launches") == 421
        assert next(e.value for e in f.evidence if e.name == "kernel_launches") == 428
    (row,) = d.steps
    # the capture is host work that queues nothing to run: not late launches, not sync refill
    assert row.idle_cause_us["host"] >= hi - lo
    assert row.idle_cause_us["launch"] < 0.1 * (hi - lo)
    assert sum(row.idle_cause_us.values()) == pytest.approx(row.idle_us, rel=1e-6)


def test_a_device_with_an_empty_name_is_named_by_its_id():
    data = load(CAPTURE)
    assert {p["name"] for p in data["deviceProperties"]} == {""}
    d = diagnose(CAPTURE)
    (dev,) = d.summary.devices
    assert (dev.id, dev.name) == (2, "GPU 2")
    header = " ".join(str(d).split("\n\n")[0].split())
    assert header.endswith("no ProfilerStep, GPUs: GPU 2")  # not "GPU 2 (GPU 2)"


def test_launches_without_gpu_activity_say_the_profiler_lost_the_gpu_side(tmp_path):
    # a GPU run whose trace kept the host's launch calls but no kernels (as in a public
    # A100 inference trace with 246 runtime calls and no GPU events): not a CPU-only run
    b = KinetoBuilder()
    with b.step(1):
        for _ in range(12):
            b.launch("void gemm_kernel", kernel_us=50.0, op="aten::mm")
    data = b.to_dict()
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("cat") != "kernel"]
    path = tmp_path / "lost.json"
    path.write_text(json.dumps(data))
    launches = sum(1 for e in data["traceEvents"] if e.get("name") == "cudaLaunchKernel")
    assert launches == 12
    d = diagnose(str(path))
    f = d.finding("gpu-idle")
    assert f.status is Status.SKIPPED
    assert "launched 12 kernels" in f.title and "did not record the GPU side" in f.title
    assert next(e.value for e in f.evidence if e.name == "kernel_launches") == 12
    assert d.finding("no-tensor-cores").status is Status.SKIPPED


def test_an_intel_xpu_launch_is_joined_to_its_kernel(tmp_path):
    # the three events of one aten::addmm on an Intel GPU (PyTorch 2.10 with PTI 0.17, Aurora),
    # as a public write-up quotes them from its trace: the cpu_op, the xpu_runtime launch call
    # and the kernel, tied by correlation 4131; XPU kernels name a "sycl queue", not a stream
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1,
         "ts": 95786069998.433, "dur": 44332.734, "args": {"External id": 5}},
        {"ph": "X", "cat": "xpu_runtime", "name": "urEnqueueKernelLaunch", "pid": 1, "tid": 1,
         "ts": 95786113648.115, "dur": 640.29, "args": {"External id": 5, "correlation": 4131}},
        {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 0,
         "ts": 95786114294.336, "dur": 8.96,
         "args": {"External id": 5, "kernel_id": 1, "sycl queue": 64, "correlation": 4131,
                  "device": 0}},
    ]  # fmt: skip
    path = tmp_path / "xpu.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    d = diagnose(str(path))
    (row,) = d.steps
    assert row.kernels == 1
    assert row.median_launch_us == pytest.approx(640.29)
    # the launch returned 646 µs before the kernel started: the GPU waited on nothing else
    assert row.idle_cause_us["launch"] == 0.0
    ls = launch_stats(TraceContext(read_trace(str(path))))
    assert ls.launches == 1
    # HTA's launch delay: from the launch call's end to the kernel's start
    assert ls.delay_us.max == pytest.approx(95786114294.336 - (95786113648.115 + 640.29), abs=1e-3)


def test_a_layout_copy_on_the_host_is_timed_by_its_copy_not_its_wrapper(tmp_path):
    # as in a public CPU-only trace: one aten::reshape of 8 elements after a permute took
    # 584 µs, of which its aten::clone 24 µs (the rest is the op's first-call overhead)
    b = KinetoBuilder()
    with b.step(1):
        for _ in range(3):
            with b.op("aten::permute", self_us=6.0):
                pass
            with b.op("aten::reshape", self_us=560.0), b.op("aten::clone", self_us=24.0):
                pass
            b.cpu(200.0)
    path = b.write(str(tmp_path / "cpu_copy.json"))
    d = diagnose(path)
    f = d.finding("contiguous-copies")
    assert next(e.value for e in f.evidence if e.name == "measured_on") == "CPU"
    assert next(e.value for e in f.evidence if e.name == "layout_copies_per_step") == 3
    assert next(e.value for e in f.evidence if e.name == "layout_copy_time_per_step") == (
        pytest.approx(3 * 24.0, abs=1.0)
    )


def _optimizer_trace(path: Path, span: str, op: str, params: int) -> str:
    b = KinetoBuilder()
    for n in range(3):
        with b.step(n):
            b.launch("gemm", kernel_us=200.0, op="aten::mm")
            with b.annotation(span):
                for _ in range(params):
                    b.launch("zero_kernel", kernel_us=1.5, op=op)
    return b.write(str(path))


@pytest.mark.parametrize(
    ("span", "op", "fix"),
    [
        ("Optimizer.zero_grad#SGD.zero_grad", "aten::zero_", "zero_grad(set_to_none=True)"),
        ("Optimizer.step#AdamW.step", "aten::add_", "torch.optim.AdamW runs aten::add_ once"),
        ("Optimizer.step#FusedAdam.step", "aten::add_", "torch._foreach_"),
        ("## optimizer ##", "aten::mul_", "torch._foreach_"),
    ],
)
def test_a_loop_inside_the_optimizer_is_torchs_per_parameter_loop(tmp_path, span, op, fix):
    """Ops the optimizer runs once per parameter are not the user's Python loop: the finding
    names the optimizer's span and gives its fix (set_to_none, foreach/fused), never "replace
    the loop with one indexed op"."""
    f = diagnose(_optimizer_trace(tmp_path / "t.json", span, op, 150)).finding("python-loop")
    assert f.title.startswith(f"Per-parameter loop in {span}: {op} runs 150 times")
    assert fix in f.fix and "indexed op" not in f.fix
    assert next(e.value for e in f.evidence if e.name == "optimizer_span") == span
    # the same ops outside the optimizer's span: a likely Python loop, with its usual fix
    b = KinetoBuilder()
    for n in range(3):
        with b.step(n):
            for _ in range(150):
                b.launch("zero_kernel", kernel_us=1.5, op=op)
    g = diagnose(b.write(str(tmp_path / "u.json"))).finding("python-loop")
    assert g.title.startswith("Likely Python loop") and "indexed op" in g.fix
    assert "optimizer_span" not in {e.name for e in g.evidence}


def test_real_zero_grad_per_parameter_is_named_so():
    """HTA's df_index_resolver trace (V100, SGD; its step 3): 404 aten::zero_ per step inside
    Optimizer.zero_grad#SGD.zero_grad (counted straight from the JSON here)."""
    path = DATA / "hta_df_index_resolver_step3.json.gz"
    data = load(path)
    evs = [e for e in data["traceEvents"] if e.get("ph") == "X"]
    (span,) = [e for e in evs if e["name"] == "Optimizer.zero_grad#SGD.zero_grad"][:1]
    inside = [
        e
        for e in evs
        if e["name"] == "aten::zero_" and span["ts"] <= e["ts"] <= span["ts"] + span["dur"]
    ]
    assert len(inside) > 300
    f = diagnose(path).finding("python-loop")
    assert f.title.startswith("Per-parameter loop in Optimizer.zero_grad#SGD.zero_grad")
    assert "set_to_none=True" in f.fix


@pytest.mark.parametrize(
    "node",
    [
        "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
        "torch::autograd::AccumulateGrad",
    ],
)
def test_the_autograd_engines_nodes_are_not_a_python_loop(tmp_path, node):
    """AccumulateGrad runs once per parameter in backward (HTA's trace_diff trace: 166 per
    step): the backward graph, not a loop the user could vectorise."""
    b = KinetoBuilder()
    for n in range(3):
        with b.step(n):
            b.launch("gemm", kernel_us=200.0, op="aten::mm")
            for _ in range(166):
                with b.op(node, self_us=5.0):
                    b.launch("acc", kernel_us=1.5, op="aten::add_")
    assert diagnose(b.write(str(tmp_path / "t.json"))).finding("python-loop").status is Status.OK
