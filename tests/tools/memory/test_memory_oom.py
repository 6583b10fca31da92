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


MIB = 2**20


def _raised(error: BaseException) -> BaseException:
    """``error`` as if it had just been raised here (with a traceback)."""
    try:
        raise error
    except BaseException as exc:
        return exc


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


FRAGMENTED = TORCH_CUDA_NEW.replace("614.16 MiB is reserved", "9.00 GiB is reserved")


def test_a_message_is_judged_by_its_own_figures_not_this_process_cache(
    fake_nvml: Any, live_cuda_torch: dict[str, Any]
) -> None:
    """On the H200 the test worker had a live CUDA torch (66 MiB cached), and the fragmentation
    verdict on a message saying 9 GiB of 31 GiB was reserved but unallocated read that 66 MiB
    instead: ok. The message's figures describe its failure."""
    fake_nvml("t4.json")
    report = explain_oom(_typed("torch", FRAGMENTED), release=False)
    frag = next(f for f in report.findings if f.id == "oom-fragmentation")
    assert frag.status is Status.WARN and frag.title.startswith("at the failure, 9.00 GiB")
    ev = {e.name: e.value for e in frag.evidence}
    assert ev["reserved_unallocated"] == 9 * 2**30 and ev["source"] == "error message"
    # built from a message, not raised here: this process's cache says nothing about it
    assert live_cuda_torch["reads"] == [] and report.reserved is None and not report.released
    assert any("not raised in this process" in n for n in report.notes)
    assert report.gpu_name == "Tesla T4"  # the card as it is now is still read
    # raised here: this process's cache is read (and reported as such), the verdict stays
    # the message's
    here = explain_oom(_raised(_typed("torch", FRAGMENTED)), release=False)
    assert live_cuda_torch["reads"] == [0] and here.reserved == 66 * MIB
    frag2 = next(f for f in here.findings if f.id == "oom-fragmentation")
    assert frag2.status is Status.WARN and frag2.title == frag.title
    # a message without the allocator's figures: this process's cache, said to be now
    bare = explain_oom(_raised(_typed("torch", "CUDA out of memory.")), release=False)
    frag3 = next(f for f in bare.findings if f.id == "oom-fragmentation")
    assert frag3.status is Status.OK and frag3.title.startswith("now, 1 MiB of torch's 66 MiB")


def test_an_error_on_a_gpu_this_process_lacks_is_explained(
    fake_nvml: Any, live_cuda_torch: dict[str, Any]
) -> None:
    """The H200 (one GPU, CUDA live in the worker) crashed explaining a message naming GPU 1:
    torch.cuda.memory_stats(1) raised "Invalid device argument". Only a GPU this process has
    is read, and the report says why the other is not."""
    fake_nvml("t4.json")  # one GPU
    report = explain_oom(_raised(RuntimeError(TORCH_CUDA_OLD)))  # GPU 1, raised here
    assert report.error is not None and report.error.device == 1
    assert live_cuda_torch["reads"] == [] and report.reserved is None
    assert any("names GPU 1; this process sees 1 CUDA GPU(s)" in n for n in report.notes)
    # nor does NVML's GPU 0 stand in for it
    assert report.gpu_name is None and not report.holders
    assert any("not on this machine (NVML sees 1 GPU(s))" in n for n in report.notes)
    frag = next(f for f in report.findings if f.id == "oom-fragmentation")
    assert frag.title.startswith("at the failure, 143 MiB of torch's 14.70 GiB cache")
    assert "oom-error" in {f.id for f in report.findings}


def test_any_error_reading_the_live_state_becomes_a_note(
    fake_nvml: Any, live_cuda_torch: dict[str, Any]
) -> None:
    fake_nvml("t4.json")
    live_cuda_torch["raise"] = RuntimeError("CUDA error: an illegal memory access\nmore")
    report = explain_oom(_raised(_typed("torch", TORCH_CUDA_NEW)), release=False)
    assert report.reserved is None and report.gpu_name == "Tesla T4"
    assert (
        "torch's allocator could not be read: RuntimeError: CUDA error: an illegal memory access"
        in report.notes
    )
    assert {f.id for f in report.findings} >= {"oom-error", "oom-fragmentation"}


@pytest.mark.parametrize(
    ("visible", "gpu", "index"),
    [(None, 1, 1), ("1", 0, 1), ("GPU-22222222", 0, 1), ("1,0", 1, 0), ("0", 1, None)],
)
def test_the_card_of_the_error_through_cuda_visible_devices(
    fake_nvml: Any,
    monkeypatch: pytest.MonkeyPatch,
    visible: str | None,
    gpu: int,
    index: int | None,
) -> None:
    """NVML lists every card and ignores CUDA_VISIBLE_DEVICES; the error's GPU N is the Nth
    card the variable makes visible (or none, when it makes fewer visible)."""
    from _support import snapshot_dict

    snap = snapshot_dict("t4.json")
    second = dict(snap["gpus"][0], index=1, name="Tesla T4 (second)", pci_bus_id="0000:00:05.0")
    second["uuid"] = "GPU-22222222-8d3a-4c1e-9b7f-2a4d6e8f0a1b"
    snap["gpus"] = [snap["gpus"][0], second]
    fake_nvml(snap)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    message = TORCH_CUDA_NEW.replace("GPU 0", f"GPU {gpu}")
    report = explain_oom(_typed("torch", message), release=False)
    assert report.gpu_index == index
    if index is None:
        assert any("CUDA_VISIBLE_DEVICES=0 makes 1 visible" in n for n in report.notes)


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


def test_the_notebook_handler_never_hides_the_users_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuprobe.tools.memory.oom import explain

    shown: list[Any] = []
    shell = type(
        "Shell", (), {"showtraceback": lambda self, info, tb_offset=None: shown.append(info)}
    )()

    def broken(exc: BaseException) -> None:
        raise RuntimeError("reading the card failed")

    monkeypatch.setattr(explain, "explain_oom", broken)
    error = _raised(_typed("torch", TORCH_CUDA_NEW))
    oom_hook._ipython_handler(shell, type(error), error, error.__traceback__)
    assert shown and shown[0][1] is error
    assert "could not explain the out-of-memory error" in capsys.readouterr().err
