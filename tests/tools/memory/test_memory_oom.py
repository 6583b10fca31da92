"""explain_oom and the hook, on real out-of-memory errors from torch's CPU allocator and Python,
and on the exact messages torch (CUDA) and CuPy print."""

from __future__ import annotations

import gc
import sys
import weakref
from typing import Any

import pytest

from gpuprobe.core.findings import Status
from gpuprobe.core.units import parse_size
from gpuprobe.tools.memory.oom import hook as oom_hook
from gpuprobe.tools.memory.oom.classify import classify_oom
from gpuprobe.tools.memory.oom.explain import explain_oom
from gpuprobe.tools.memory.oom.hook import install_oom_hook, uninstall_oom_hook
from gpuprobe.tools.memory.oom.report import OomReport

torch = pytest.importorskip("torch")

# torch 2.1+ wording (CUDACachingAllocator.cpp), from a real report
TORCH_CUDA_NEW = (
    "CUDA out of memory. Tried to allocate 698.00 MiB. GPU 0 has a total capacity of 23.56 GiB "
    "of which 559.00 MiB is free. Including non-PyTorch memory, this process has 23.01 GiB memory "
    "in use. Of the allocated memory 22.08 GiB is allocated by PyTorch, and 614.16 MiB is "
    "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
)
# torch 1.x-2.0 wording
TORCH_CUDA_OLD = (
    "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 1; 15.78 GiB total capacity; 14.56 GiB "
    "already allocated; 3.44 MiB free; 14.70 GiB reserved in total by PyTorch)"
)
CUPY = "Out of memory allocating 800,000,512 bytes (allocated so far: 1,024 bytes)."


def _impossible() -> None:
    torch.empty(2**62, dtype=torch.uint8)


def _real_cpu_oom() -> BaseException:
    try:
        _impossible()
    except RuntimeError as exc:
        return exc
    raise AssertionError("torch allocated 4 EiB")


def test_real_torch_cpu_oom_is_classified_with_the_request() -> None:
    e = classify_oom(_real_cpu_oom())
    assert e is not None
    assert (e.kind, e.framework, e.pattern) == ("host", "torch", "torch-cpu")
    assert e.requested == 2**62


def test_python_memory_error_and_non_oom() -> None:
    try:
        bytearray(2**62)
    except MemoryError as exc:
        e = classify_oom(exc)
    assert e is not None and e.framework == "python" and e.kind == "host"
    assert classify_oom(ValueError("shapes do not match")) is None
    assert classify_oom(RuntimeError("expected all tensors on the same device")) is None


def _typed(module: str, message: str) -> BaseException:
    cls = type("OutOfMemoryError", (RuntimeError,), {"__module__": module})
    return cls(message)


def test_torch_cuda_messages_both_wordings() -> None:
    new = classify_oom(_typed("torch", TORCH_CUDA_NEW))
    assert new is not None and new.kind == "cuda" and new.type_name == "torch.OutOfMemoryError"
    assert new.requested == parse_size("698 MiB") and new.device == 0
    assert new.total == parse_size("23.56GiB") and new.free == parse_size("559 MiB")
    assert new.allocated == parse_size("22.08 GiB")
    assert new.reserved == parse_size("22.08 GiB") + parse_size("614.16 MiB")
    old = classify_oom(RuntimeError(TORCH_CUDA_OLD))  # plain RuntimeError, message only
    assert old is not None and old.device == 1
    assert old.allocated == parse_size("14.56 GiB") and old.reserved == parse_size("14.70 GiB")
    assert old.free == parse_size("3.44 MiB") and old.total == parse_size("15.78 GiB")


def test_cupy_error_by_type_and_message() -> None:
    e = classify_oom(_typed("cupy.cuda.memory", CUPY))
    assert e is not None and e.framework == "cupy" and e.kind == "cuda"
    assert e.requested == 800_000_512 and e.allocated == 1024


def test_oom_found_through_the_exception_chain() -> None:
    try:
        try:
            _impossible()
        except RuntimeError as inner:
            raise ValueError("the training step failed") from inner
    except ValueError as outer:
        e = classify_oom(outer)
    assert e is not None and e.pattern == "torch-cpu"


def test_parse_size() -> None:
    assert parse_size("2GiB") == 2 * 2**30
    assert parse_size("512 MiB") == 512 * 2**20
    assert parse_size("800MB") == 800_000_000
    assert parse_size("1,024 bytes") == 1024
    for bad in ("lots", "2 parsecs", ""):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_explain_real_oom_lists_tensors_and_gives_memory_back() -> None:
    keep = torch.ones(3_000_000)  # 12 MB, alive through the report

    def failing_step() -> None:
        activations = torch.ones(2_000_000)  # held only by this frame
        ref.append(weakref.ref(activations))
        _impossible()

    ref: list[Any] = []
    try:
        failing_step()
    except RuntimeError as exc:
        report = explain_oom(exc)
    gc.collect()
    assert ref[0]() is None  # the failed frame's tensor was given back
    ids = {f.id: f for f in report.findings}
    assert ids["oom-error"].status is Status.FAIL
    assert report.error is not None and report.error.requested == 2**62
    assert report.tensors[0].bytes >= keep.numel() * 4
    assert any(t.shape == (3_000_000,) for t in report.tensors)
    assert report.released and ids["oom-released"].status is Status.OK
    assert report.host_total and report.host_available
    assert "what to do" in str(report)
    assert OomReport.from_dict(report.to_dict()) == report


def test_explain_inside_except_uses_the_handled_error() -> None:
    try:
        _impossible()
    except RuntimeError:
        report = explain_oom(release=False)
    assert report.error is not None and report.error.pattern == "torch-cpu"
    assert not report.released


def test_fragmentation_and_other_processes_from_a_cuda_report(fake_nvml: Any) -> None:
    from _support import snapshot_dict

    snap = snapshot_dict("t4.json")
    snap["gpus"][0]["processes"] = [
        {"pid": 424242, "used_memory": 4 * 2**30, "kind": "compute", "name": "other"}
    ]
    fake_nvml(snap)
    report = explain_oom(_typed("torch", TORCH_CUDA_NEW), release=False)
    ids = {f.id: f for f in report.findings}
    # 614 MiB reserved-but-unallocated is only 3 % of the cache but covers most of the 698 MiB
    # request: not fragmentation by either rule
    assert ids["oom-fragmentation"].status is Status.OK
    assert report.holders and report.holders[0].pid == 424242
    assert ids["oom-other-processes"].status is Status.WARN  # 4 GiB of a 15 GiB T4
    frag = TORCH_CUDA_NEW.replace("614.16 MiB is reserved", "9.00 GiB is reserved")
    ids2 = {f.id: f for f in explain_oom(_typed("torch", frag), release=False).findings}
    assert ids2["oom-fragmentation"].status is Status.WARN
    assert "expandable_segments:True" in ids2["oom-fragmentation"].fix


def test_hook_prints_the_report_after_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    before = sys.excepthook
    install_oom_hook()
    try:
        assert sys.excepthook is oom_hook._hook
        install_oom_hook()  # idempotent: uninstall still restores the original
        exc = _real_cpu_oom()
        sys.excepthook(type(exc), exc, exc.__traceback__)
        err = capsys.readouterr().err
        assert "Traceback" in err and "DefaultCPUAllocator" in err
        assert "out of memory, explained" in err and "ran out of memory" in err
        other = ValueError("not memory")
        sys.excepthook(ValueError, other, None)
        err = capsys.readouterr().err
        assert "ValueError: not memory" in err and "explained" not in err
    finally:
        uninstall_oom_hook()
    assert sys.excepthook is before


# The usual full-card message: torch prints sizes up to 1 KiB as "N bytes" (c10
# CUDACachingAllocator format_size), so a card with nothing left says "0 bytes is free".
TORCH_CUDA_FULL = (
    "CUDA out of memory. Tried to allocate 512 bytes. GPU 0 has a total capacity of 79.10 GiB "
    "of which 0 bytes is free. Including non-PyTorch memory, this process has 79.09 GiB memory "
    "in use. Of the allocated memory 78.50 GiB is allocated by PyTorch, and 1024 bytes is reserved "
    "by PyTorch but unallocated."
)


def test_sizes_torch_prints_in_bytes() -> None:
    e = classify_oom(_typed("torch", TORCH_CUDA_FULL))
    assert e is not None and e.kind == "cuda"
    assert (e.requested, e.free) == (512, 0)
    assert e.total == int(79.10 * 2**30) and e.allocated == int(78.50 * 2**30)
    assert e.reserved == int(78.50 * 2**30) + 1024  # allocated + reserved-but-unallocated
