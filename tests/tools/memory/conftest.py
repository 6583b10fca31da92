"""Fixtures of the memory tests."""

from __future__ import annotations

from typing import Any

import pytest

MIB = 2**20


@pytest.fixture
def live_cuda_torch(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """This process as a test worker on the H200 was: torch has initialised CUDA on its one GPU
    and its cache holds 66 MiB. Reading another GPU index raises as torch does ("Invalid device
    argument : did you call init?"); ``state["raise"]`` makes every read raise."""
    from gpuprobe.platform.frameworks import torch_memory as tm

    state: dict[str, Any] = {"reads": [], "raise": None}

    def cuda_memory(device: int | None = None) -> dict[str, int]:
        state["reads"].append(device)
        if state["raise"] is not None:
            raise state["raise"]
        if device not in (None, 0):
            raise RuntimeError("Invalid device argument : did you call init?")
        return {
            "device": 0,
            "allocated": 65 * MIB,
            "reserved": 66 * MIB,
            "inactive_split": 0,
            "peak_allocated": 65 * MIB,
            "alloc_retries": 0,
            "ooms": 0,
            "free": 140 * 2**30,
            "total": 141 * 2**30,
        }

    monkeypatch.setattr(tm, "cuda_initialized", lambda: True)
    monkeypatch.setattr(tm, "cuda_device_count", lambda: 1)
    monkeypatch.setattr(tm, "cuda_memory", cuda_memory)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return state
