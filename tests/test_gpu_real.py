"""On a real NVIDIA GPU (skipped elsewhere): the live inventory and the kernel checks."""

from __future__ import annotations

import pytest

from gpuprobe.platform.inventory import inventory
from gpuprobe.tools.doctor.rules.kernels import MATMUL_REL_ERR_FAIL
from gpuprobe.tools.doctor.worker import run_checks

pytestmark = pytest.mark.gpu


def test_live_inventory_has_peaks_sms_and_frameworks() -> None:
    inv = inventory(frameworks="runtime")
    assert inv.driver.status == "ok" and inv.gpus
    g = inv.gpus[0]
    assert g.sm_count and g.fp32_cores == g.sm_count * g.fp32_cores_per_sm
    assert g.pcie.gen_max and g.memory_total
    torch = inv.framework("torch")
    if torch is not None and torch.importable:
        assert {d.uuid for d in torch.devices} >= {inv.gpus[0].uuid}


def test_torch_kernels_on_cuda0_are_correct_and_timed_with_events() -> None:
    pytest.importorskip("torch")
    r = run_checks("torch", "cuda:0", quick=True)
    assert r.error is None, r.error
    assert r.rel_errors["matmul-float32"] < MATMUL_REL_ERR_FAIL
    mm = r.measurement("matmul-float32")
    assert mm is not None and mm.timer == "cuda-event" and mm.flops > 1e12
    h2d = r.measurement("h2d-pinned")
    assert h2d is not None and 1e9 < h2d.bytes_per_s < 1e12
    assert r.under_load and r.under_load[0].pcie_gen
