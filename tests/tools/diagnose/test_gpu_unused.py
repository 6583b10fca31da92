"""``gpu-unused``: a trace whose header names a GPU but that holds no GPU work. The real CPU-only
traces of the corpus are judged here (none is a GPU that sat unused: each with a GPU in its
header also shows the GPU ran, through NCCL collectives or kernel launches the profiler did not
record); the warning itself is checked on a trace built with KinetoBuilder, as no real trace
of an unused GPU was found. MTIA traces are neither CPU-only nor an unused GPU."""

from __future__ import annotations

import gzip
import json

from gpuprobe import cli
from gpuprobe.core.findings import Status
from gpuprobe.tools.diagnose.engine import diagnose
from gpuprobe.tools.diagnose.synthetic import KinetoBuilder

from .realdata import CPU_ONLY, DATA, load

A100_NO_GPU_EVENTS = DATA / "hta_distributed_info_unavailable__distributed_info_not_found.json.gz"
CPU_RANK = DATA / "hta_rank_non_gpu__rank_non_gpu.json.gz"
MTIA = DATA / "hta_mtia_inference_trace__mtia_inference_rank_0.json.gz"


def _ev(f, name: str):
    return next(e.value for e in f.evidence if e.name == name)


def test_a100_header_with_nccl_collectives_ran_on_the_gpu_unrecorded():
    data = load(A100_NO_GPU_EVENTS)
    step = next(e for e in data["traceEvents"] if e["name"].startswith("ProfilerStep#"))
    nccl = [e for e in data["traceEvents"] if e["name"] == "nccl:all_to_all"]
    d = diagnose(A100_NO_GPU_EVENTS)
    f = d.finding("gpu-unused")
    assert f.status is Status.INFO and f.gain is None
    assert _ev(f, "device") == "NVIDIA A100-PG509-200 (8 in deviceProperties)"
    assert len(data["deviceProperties"]) == 8
    assert _ev(f, "host_time") == round(step["dur"] / 1e3, 2) == 75.47
    assert (
        _ev(f, "gpu_use_signs") == f"{len(nccl)} ops that take GPU tensors only (nccl:all_to_all)"
    )
    assert len(nccl) == 6
    assert "ProfilerActivity.CUDA" in f.fix
    assert d.headline is None or d.headline.id != "gpu-unused"


def test_the_same_rank_without_a_header_still_shows_the_gpu_ran():
    f = diagnose(CPU_RANK).finding("gpu-unused")
    assert f.status is Status.INFO
    assert _ev(f, "device") == "a GPU" and _ev(f, "gpu_signs") == "none in the header"


def test_cpu_only_rank_with_no_sign_of_a_gpu_is_skipped():
    data = load(CPU_ONLY)
    assert data["deviceProperties"] == [] and data["distributedInfo"]["backend"] == "gloo"
    f = diagnose(CPU_ONLY).finding("gpu-unused")
    assert f.status is Status.SKIPPED and "CPU-only run" in f.title


def test_mtia_trace_is_not_an_unused_gpu():
    # its deviceProperties list an MTIA device ("ARTEMIS"), its device activity is not read
    f = diagnose(MTIA).finding("gpu-unused")
    assert f.status is Status.SKIPPED and "an MTIA trace" in f.title


def _cpu_run_on_a_gpu_machine(path, **kwargs) -> str:
    b = KinetoBuilder(device_name="NVIDIA H100 80GB HBM3", **kwargs)
    for n in range(3):
        with b.step(n), b.op("aten::linear", self_us=4000.0), b.op("aten::addmm", self_us=3900.0):
            pass
    return b.write(str(path))


def test_cpu_work_on_a_gpu_machine_warns_and_heads_the_diagnosis(tmp_path, capsys):
    path = _cpu_run_on_a_gpu_machine(tmp_path / "cpu_on_h100.json.gz")
    with gzip.open(path, "rt") as fh:
        steps = [e for e in json.load(fh)["traceEvents"] if e["name"].startswith("ProfilerStep")]
    d = diagnose(path)
    f = d.finding("gpu-unused")
    assert f.status is Status.WARN and f.gain is None and d.headline is f
    host_ms = sum(e["dur"] for e in steps) / 1e3
    assert f.title == (
        f"GPU present but unused: no kernels or copies in {host_ms:,.1f} ms of host work on "
        "NVIDIA H100 80GB HBM3 (steps 0..2)"
    )
    assert "model.to('cuda')" in f.fix and "CUDA_VISIBLE_DEVICES" in f.fix
    assert any("gain not priced" in line for line in f.details)
    assert d.to_dict()["headline"] == "gpu-unused"
    assert cli.main(["diagnose", str(path)]) == 0
    assert "First: gpu-unused: GPU present but unused" in capsys.readouterr().out


def test_cuda_memory_events_show_the_gpu_ran(tmp_path):
    b = KinetoBuilder()
    with b.step(1), b.op("aten::empty", self_us=10.0):
        b.memory(1 << 20, 2 << 20)
    path = b.write(str(tmp_path / "mem.json.gz"))
    f = diagnose(path).finding("gpu-unused")
    assert f.status is Status.INFO and "CUDA memory events on device 0" in _ev(f, "gpu_use_signs")


def test_a_window_with_runtime_calls_only_is_not_an_unused_gpu(tmp_path):
    # a device query and a synchronize, no op on the host, nothing on the GPU (the expert set's
    # 7-call A100 window and 5-call RTX 3090 window): nothing ran to judge, on either side
    b = KinetoBuilder(device_name="NVIDIA A100-PCIE-40GB")
    b.sync("cudaGetDeviceCount")
    b.sync("cudaDeviceSynchronize")
    f = diagnose(b.write(str(tmp_path / "empty.json.gz"))).finding("gpu-unused")
    assert f.status is Status.OK and f.title.startswith("Unused GPU: nothing ran")
    assert "2 runtime calls" in f.title and _ev(f, "cpu_ops") == 0
