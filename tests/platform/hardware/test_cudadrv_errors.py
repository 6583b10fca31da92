"""The CUresult names gpuprobe prints, checked against cuda.h, and the stub-library failure."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from _support import DATA
from gpuprobe.platform.hardware import cudadrv
from gpuprobe.platform.hardware.types import CudaView
from gpuprobe.platform.inventory import load
from gpuprobe.tools.doctor.engine import judge

# enum cudaError_enum in cuda.h (CUDA 12.x/13.0): the values of every name gpuprobe uses, copied
# from the header (it is also in cuda-python's cuda.bindings.driver.CUresult).
CUDA_H = {
    "CUDA_ERROR_OUT_OF_MEMORY": 2,
    "CUDA_ERROR_NOT_INITIALIZED": 3,
    "CUDA_ERROR_STUB_LIBRARY": 34,
    "CUDA_ERROR_INSUFFICIENT_DRIVER": 35,
    "CUDA_ERROR_DEVICE_UNAVAILABLE": 46,
    "CUDA_ERROR_NO_DEVICE": 100,
    "CUDA_ERROR_INVALID_DEVICE": 101,
    "CUDA_ERROR_NO_BINARY_FOR_GPU": 209,
    "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED": 217,
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": 222,
    "CUDA_ERROR_OPERATING_SYSTEM": 304,
    "CUDA_ERROR_SYSTEM_NOT_READY": 802,
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": 803,
    "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": 804,
    "CUDA_ERROR_UNKNOWN": 999,
}


def test_every_name_has_its_cuda_h_value() -> None:
    assert {name: code for code, name in cudadrv.CUDA_ERRORS.items()} == CUDA_H
    assert len(set(cudadrv.CUDA_ERRORS.values())) == len(cudadrv.CUDA_ERRORS)  # no name twice
    assert set(cudadrv.CUDA_ERROR_FIXES) <= set(cudadrv.CUDA_ERRORS)


class _StubLibcuda:
    """libcuda.so from the toolkit's stubs folder: every call answers CUDA_ERROR_STUB_LIBRARY."""

    def cuInit(self, flags: int) -> int:
        return 34

    def cuDriverGetVersion(self, out: Any) -> int:
        return 34


def test_the_stub_libcuda_is_named_and_fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cudadrv.ctypes, "CDLL", lambda name: _StubLibcuda())
    view = cudadrv.read_cuda_view()
    assert view.status == "error" and view.error == "CUDA_ERROR_STUB_LIBRARY (34)"
    monkeypatch.undo()
    inv = load(DATA / "t4.json")
    inv = dataclasses.replace(inv, cuda=view, cuda_all=view)
    ids = {f.id: f for f in judge(inv)}
    f = ids["cuda-stub-library"]
    assert f.status.value == "fail" and "CUDA_ERROR_STUB_LIBRARY (34)" in f.title
    assert "stubs" in (f.fix or "") and "LD_LIBRARY_PATH" in (f.fix or "")
    assert "--gpus all" in (f.fix or "")


def test_a_busy_gpu_is_device_unavailable_not_devices() -> None:
    view = CudaView(status="error", error=cudadrv._err(46))
    assert view.error == "CUDA_ERROR_DEVICE_UNAVAILABLE (46)"
    inv = dataclasses.replace(load(DATA / "t4.json"), cuda=view, cuda_all=view)
    f = {f.id: f for f in judge(inv)}["cuda-init-failed"]
    assert "EXCLUSIVE_PROCESS" in (f.fix or "")
