"""The doctor on a machine with little memory (issue 41: under a 1.5 GB cap, "FAIL
numpy-cpu-failed: MemoryError: Unable to allocate 763 MiB", verdict "something is broken"):
E1 is sized to the memory free, says so, and the doctor's own allocation failing is never called
a broken NumPy."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest

from _support import DATA
from gpuprobe.core.findings import Status
from gpuprobe.platform.inventory import load
from gpuprobe.tools.doctor.model import DoctorContext
from gpuprobe.tools.doctor.rules.kernels import judge_cpu
from gpuprobe.tools.doctor.worker import E1_HOST_BYTES, E1_MEMORY_FRACTION, WorkerResult, e1_size

CAP = 1536 * 2**20  # 1.5 GiB of address space, as `prlimit --as` or `ulimit -v` sets it


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def test_under_a_1_5_gib_cap_numpy_measures_a_smaller_e1_and_says_so() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "gpuprobe.tools.doctor.worker", "numpy", "cpu", "--no-matmul"],
        capture_output=True,
        text=True,
        preexec_fn=_capped,
        timeout=300,
    )
    r = WorkerResult.from_dict(json.loads(p.stdout))
    assert r.error is None, r.error
    assert r.available_memory is not None and r.available_memory < CAP
    m = r.measurement("e1-float64")
    assert m is not None and m.metadata["asked_n"] == 10_000
    n = m.metadata["n"]
    assert 500 <= n < 10_000
    assert n * n * E1_HOST_BYTES["numpy"] <= E1_MEMORY_FRACTION * r.available_memory
    inv = load(DATA / "t4.json")
    findings = judge_cpu.judge(DoctorContext(inv, workers=(r,)))
    assert not any(f.failed for f in findings)
    (e1,) = [f for f in findings if f.id == "cpu-e1"]
    assert f"summed over {n}×{n}" in e1.title and "sized to the memory free here" in e1.title


def test_the_doctors_own_allocation_failing_is_skipped_not_a_broken_numpy() -> None:
    oom = WorkerResult(
        "numpy",
        "cpu",
        error="MemoryError: Unable to allocate 763. MiB for an array with shape (10000, 10000)",
        out_of_memory=True,
        available_memory=600 * 2**20,
    )
    inv = load(DATA / "t4.json")
    findings = judge_cpu.judge(DoctorContext(inv, workers=(oom,)))
    assert [(f.id, f.status) for f in findings] == [("cpu-e1", Status.SKIPPED)]
    assert "not measured" in findings[0].title and "--quick" in findings[0].fix
    broken = WorkerResult("numpy", "cpu", error="ImportError: libopenblas.so.0")  # a real fault
    (f,) = judge_cpu.judge(DoctorContext(inv, workers=(broken,)))
    assert (f.id, f.status) == ("numpy-cpu-failed", Status.FAIL)


@pytest.mark.parametrize(
    ("available", "n"),
    [(None, 10_000), (64 * 2**30, 10_000), (1451 * 2**20, 5_700), (10 * 2**20, 500)],
)
def test_e1_size_fits_the_memory(available: int | None, n: int) -> None:
    assert e1_size(10_000, E1_HOST_BYTES["numpy"], available) == n
    assert e1_size(4_096, E1_HOST_BYTES["numpy"], 64 * 2**30) == 4_096  # --quick's, as it was


@pytest.mark.parametrize(
    ("files", "room"),
    [
        ({"memory.max": "1610612736", "memory.current": "536870912"}, 1 << 30),  # v2
        ({"memory.max": "max", "memory.current": "536870912"}, None),
        (
            {
                "memory/memory.limit_in_bytes": "1610612736",
                "memory/memory.usage_in_bytes": "1073741824",
            },
            512 << 20,
        ),  # v1
        (
            {
                "memory/memory.limit_in_bytes": "9223372036854771712",
                "memory/memory.usage_in_bytes": "1",
            },
            None,
        ),  # v1: "no limit" is about 2**63
    ],
)
def test_a_memory_cgroup_limit_counts_as_the_memory_free(tmp_path, files, room) -> None:
    """A container's or systemd's MemoryMax: what the E1 above is sized to, with RLIMIT_AS and
    the machine's available memory (platform/hardware/host.available_memory)."""
    from gpuprobe.platform.hardware.host import _cgroup_room

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text + "\n")
    assert _cgroup_room(tmp_path) == room
