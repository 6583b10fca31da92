"""Shared machines and honest advice in precision, fit, pack and doctor (issue 15)."""

from __future__ import annotations

import pytest

from gpuprobe.core.findings import Status
from gpuprobe.platform.hardware.load import HOST_BUSY_WARN_FRACTION, HostLoad, host_busy_finding
from gpuprobe.tools.memory.model import PrecisionReport, PrecisionResult
from gpuprobe.tools.memory.rules.precision import precision_results
from gpuprobe.tools.monitor.pack_model import PackCopy, PackLevel, PackReport
from gpuprobe.tools.monitor.rules.pack import judge as pack_judge

torch = pytest.importorskip("torch")


def test_host_busy_finding_threshold() -> None:
    cores = 8
    below = HOST_BUSY_WARN_FRACTION * cores
    assert host_busy_finding("x", "it", below, cores, effect="e", fix="f") is None
    f = host_busy_finding("x", "it", below + 0.5, cores, effect="slowed", fix="f")
    assert f is not None and f.status is Status.WARN
    assert (
        f.title
        == f"it was measured while other processes kept {below + 0.5:.1f} of 8 cores busy: slowed"
    )
    assert host_busy_finding("x", "it", None, cores, effect="e", fix="f") is None


def _cpu_no_gain(flags: frozenset[str]) -> str:
    r = PrecisionReport(
        device="cpu",
        batch=8,
        results=(
            PrecisionResult(dtype="fp32", outcome="ok", median_s=0.01, speedup=1.0, rel_error=0.0),
            PrecisionResult(dtype="bf16", outcome="ok", median_s=0.02, speedup=0.5, rel_error=1e-3),
        ),
    )
    f = next(f for f in precision_results(r, flags) if f.id == "precision-no-gain")
    return f.details[0]


def test_precision_reads_amx_from_the_cpu_flags() -> None:
    with_amx = _cpu_no_gain(frozenset({"avx512f", "amx_tile", "amx_bf16"}))
    assert "computes bf16 in hardware (amx_bf16)" in with_amx and "without" not in with_amx
    without = _cpu_no_gain(frozenset({"avx2", "avx512f"}))
    assert "has none of amx_bf16, avx512_bf16" in without


class _Oom(torch.nn.Module):
    def forward(self, x):  # type: ignore[no-untyped-def]
        raise RuntimeError(
            "DefaultCPUAllocator: can't allocate memory: you tried to allocate 13421772800 "
            "bytes. Error code 12 (Cannot allocate memory)"
        )


def test_precision_out_of_memory_is_a_failure_explained() -> None:
    from gpuprobe.tools.memory.precision import precision_sweep

    r = precision_sweep(_Oom(), (torch.zeros(4, 3),), ("fp32",), budget_s=0.01, device="cpu")
    f = next(f for f in r.findings if f.id == "precision-out-of-memory")
    assert f.status is Status.FAIL and "fp32 ran out of memory at batch 4" in f.title
    assert "can't allocate memory" in f.title and "--batch" in f.fix


def test_precision_cli_exits_1_when_out_of_memory(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuprobe.cli import main
    from gpuprobe.tools.memory import demo

    monkeypatch.setattr(demo, "encoder", lambda device: _Oom())
    assert main(["precision", "--device", "cpu", "--dtypes", "fp32", "--budget", "0.01"]) == 1
    assert "ran out of memory" in capsys.readouterr().out


def test_precision_measures_the_host_load() -> None:
    from gpuprobe.tools.memory.precision import precision_sweep

    r = precision_sweep(torch.nn.Linear(4, 4), (torch.zeros(2, 4),), ("fp32",), budget_s=0.05)
    assert r.others_cores is not None and r.others_cores >= 0


def test_fit_measures_the_host_load() -> None:
    from gpuprobe.tools.memory.fit import fit

    r = fit(lambda b: sum(range(b)), [1, 2, 4], repeats=1, curve=False)
    assert r.best == 4 and r.others_cores is not None and r.others_cores >= 0


def _level(n: int, others: float, copy_s: float) -> PackLevel:
    copies = tuple(PackCopy(index=i, wall_s=copy_s, exit_code=0, cpu_s=copy_s) for i in range(n))
    return PackLevel(
        n=n,
        copies=copies,
        wall_s=copy_s,
        mean_copy_s=copy_s,
        throughput=n * 3600 / copy_s,
        slowdown=copy_s / 1.0,
        cpu_percent=100.0 * n,
        others_cores=others,
    )


def test_pack_says_when_the_host_was_busy() -> None:
    busy = PackReport(
        command=("python", "job.py"),
        levels=(_level(1, 13.0, 1.0), _level(2, 12.0, 2.1)),
        unit="jobs/h",
        recommended=1,
        cores=16,
        load_average=(14.0, 14.0, 13.0),
    )
    ids = {f.id: f for f in pack_judge(busy)}
    f = ids["pack-host-busy"]
    assert f.status is Status.WARN and "13.0 of 16 cores" in f.title
    assert {e.name: e.value for e in f.evidence}["load_average_1min"] == 14.0
    rec = ids["pack-recommend"]
    assert rec.title.startswith("run one copy at a time") and "2 copies lose 5 %" in rec.title
    assert rec.fix == "run one copy at a time: more copies did not raise the total"
    quiet = PackReport(
        command=("python", "job.py"),
        levels=(_level(1, 0.2, 1.0), _level(2, 0.1, 1.0)),
        unit="jobs/h",
        recommended=2,
        cores=16,
    )
    assert "pack-host-busy" not in {f.id for f in pack_judge(quiet)}


def test_pack_never_says_minus_zero() -> None:
    r = PackReport(
        command=("x",),
        levels=(_level(1, 0.0, 1.0), _level(2, 0.0, 1.0), _level(3, 0.0, 3.001)),
        unit="jobs/h",
        recommended=2,
        cores=16,
    )
    rec = next(f for f in pack_judge(r) if f.id == "pack-recommend")
    assert "3 copies add nothing" in rec.title or "lose" in rec.title
    assert "-0 %" not in rec.title


def test_doctor_says_when_the_host_was_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpuprobe.tools.doctor.engine as doc
    from _support import DATA
    from gpuprobe.platform.inventory import load

    class Busy(HostLoad):
        def others_cores(self) -> float:
            return 3.5

    monkeypatch.setattr(doc, "HostLoad", Busy)
    monkeypatch.setattr(doc, "run_workers", lambda plan, quick, progress=None: [])
    report = doc.doctor(inventory=load(DATA / "t4.json"), run_kernels=True)
    f = report.finding("doctor-host-busy")
    assert f is not None and f.status is Status.WARN and "3.5 of 4 cores" in f.title
    assert report.others_cores == 3.5
    quiet = doc.doctor(inventory=load(DATA / "t4.json"))  # a snapshot judged: nothing measured
    assert quiet.finding("doctor-host-busy") is None and quiet.others_cores is None
