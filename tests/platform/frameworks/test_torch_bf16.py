"""bf16 is judged by the compute capability of the device asked, not by torch's emulation-aware
``is_bf16_supported`` of the current device."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from gpuprobe.platform.frameworks import torch_precision as tp  # noqa: E402


def test_bf16_by_the_asked_devices_compute_capability(monkeypatch: pytest.MonkeyPatch) -> None:
    caps = {0: (7, 5), 1: (8, 0), 2: (7, 0), 3: (12, 0)}  # T4, A100, V100, RTX 5090

    def capability(device=None):  # torch.cuda.get_device_capability's signature
        d = torch.device(device) if device is not None else torch.device("cuda:0")
        return caps[d.index or 0]

    monkeypatch.setattr(torch.cuda, "get_device_capability", capability)
    # torch says True on a T4 or V100 (it counts emulation) and asks the current device only
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    got = {i: tp.bf16_supported(f"cuda:{i}") for i in caps}
    assert got == {0: False, 1: True, 2: False, 3: True}
    assert tp.bf16_supported("cpu") is True
