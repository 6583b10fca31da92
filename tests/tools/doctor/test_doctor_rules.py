"""The doctor's rules have one shape: each is a :class:`~gpuprobe.core.rules.Rule` and emits only
the finding ids it declares, over the recorded snapshots, their broken variants and kernel
results."""

from __future__ import annotations

import dataclasses

import pytest

from _support import DATA
from gpuprobe.core.rules import Rule, declared_ids, undeclared
from gpuprobe.platform.hardware.types import GpuSample
from gpuprobe.platform.inventory import Inventory, load
from gpuprobe.platform.measurement import Measurement
from gpuprobe.tools.doctor.model import DoctorContext
from gpuprobe.tools.doctor.rules import RULES
from gpuprobe.tools.doctor.rules.kernels import UNDER_LOAD_IDS
from gpuprobe.tools.doctor.worker import WorkerResult

SNAPSHOTS = sorted(p.name for p in DATA.glob("*.json"))


def _variants(inv: Inventory) -> list[Inventory]:
    """The snapshot and the failures the snapshot tests build from it."""
    torch = {"importable": False, "error": "ImportError: libcudnn.so.9"}
    out = [inv, dataclasses.replace(inv, env={**inv.env, "CUDA_VISIBLE_DEVICES": "7,0"})]
    out.append(
        dataclasses.replace(
            inv,
            frameworks=tuple(
                dataclasses.replace(f, **torch) if f.name == "torch" else f for f in inv.frameworks
            ),
        )
    )
    for status in ("version-mismatch", "no-permission", "no-library", "error"):
        out.append(dataclasses.replace(inv, driver=dataclasses.replace(inv.driver, status=status)))
    if inv.gpus:
        g = dataclasses.replace(
            inv.gpus[0], ecc_uncorrected_volatile=2, retired_pages=3, persistence_mode=False
        )
        out.append(dataclasses.replace(inv, gpus=(g,)))
    return out


def _workers(inv: Inventory, slow: bool) -> tuple[WorkerResult, ...]:
    def times(fw: str, device: str, t: float) -> tuple[Measurement, ...]:
        return tuple(
            Measurement.from_times(n, fw, device, [t] * 3, metadata={"dtype": "float32", "n": 4096})
            for n in ("e1-float32", "matmul-float32")
        )

    load_samples = (
        GpuSample(
            index=0,
            time=1.0,
            clock_event_reasons=("hw_slowdown",) if slow else ("sw_power_cap",),
            pcie_gen=1,
            pcie_width=8,
        ),
    )
    out = [
        WorkerResult("numpy", "cpu", error="crashed: MemoryError") if slow else None,
        WorkerResult("torch", "cpu", measurements=times("torch", "cpu", 1.0)),
    ]
    for i, g in enumerate(inv.gpus):
        for fw in ("torch", "cupy"):
            out.append(
                WorkerResult(
                    fw,
                    f"cuda:{i}",
                    uuid=g.uuid,
                    measurements=times(fw, f"cuda:{i}", 2.0 if slow else 0.01),
                    under_load=load_samples,
                    rel_errors={"matmul-float32": 0.5 if slow else 1e-4},
                )
            )
        out.append(WorkerResult("jax", f"cuda:{i}", uuid=g.uuid, error="no kernel image"))
    return tuple(w for w in out if w is not None)


def test_every_doctor_rule_is_a_rule() -> None:
    assert RULES and all(isinstance(r, Rule) for r in RULES)
    assert declared_ids(RULES) >= set(UNDER_LOAD_IDS)


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_doctor_rules_emit_only_the_ids_they_declare(name: str) -> None:
    for inv in _variants(load(DATA / name)):
        assert undeclared(RULES, DoctorContext(inv)) == []
        for slow in (False, True):
            assert undeclared(RULES, DoctorContext(inv, _workers(inv, slow))) == []


@pytest.mark.parametrize("slow", [False, True])
def test_a_gpus_link_and_clocks_under_load_are_reported_once(slow: bool) -> None:
    """torch and cupy both ran on each GPU and both saw its link at gen 1 x8 (and its clocks held
    back): each GPU gets each under-load finding once, from the first framework."""
    from gpuprobe.tools.doctor.engine import judge

    inv = load(DATA / "h200.json")
    findings = judge(inv, list(_workers(inv, slow)))
    for fid in UNDER_LOAD_IDS:
        subjects = [f.subject for f in findings if f.id == fid]
        assert len(subjects) == len(set(subjects)), (fid, subjects)
    links = [f for f in findings if f.id == "pcie-link-downgraded"]
    assert len(links) == len(inv.gpus) == 1
    assert "gen 1 x8" in links[0].title


def test_host_busy_speaks_of_a_gpu_speedup_only_where_there_is_a_gpu() -> None:
    """Issue 41: doctor-host-busy spoke of "the GPU's speedup" on a machine without a GPU."""
    from gpuprobe.tools.doctor.rules.host import host_busy

    inv = load(DATA / "h200.json")
    cores = inv.host.usable_cores or inv.host.logical_cores or 2
    (with_gpu,) = host_busy.judge(DoctorContext(inv, others_cores=float(cores)))
    no_gpu = dataclasses.replace(inv, gpus=(), pci_nvidia=())
    (without,) = host_busy.judge(DoctorContext(no_gpu, others_cores=float(cores)))
    assert "GPU's speedup" in with_gpu.title
    assert "GPU" not in without.title and "CPU timings" in without.title
    assert without.title.endswith("slower than this machine is when idle")
