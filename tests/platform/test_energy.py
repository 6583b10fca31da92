"""``with gpuprobe.energy() as e:``: each GPU's joules from the real nvidia-ml-py over the fake
NVML library (a scripted total-energy counter, power where there is none), the host's from a RAPL
folder laid out as Linux lays it out (a counter that wraps, sub-zones left out, one readable by
root only), and what cannot be measured said, never read as 0 J (issue 43, energy)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import gpuprobe
from gpuprobe.platform.energy import COUNTER_MIN_S, EnergyMeter
from gpuprobe.platform.hardware import energy as hw_energy
from gpuprobe.platform.hardware.nvml import nvml_session

H200_W = 80.771  # tests/data/h200.json's power draw, which the fake answers every time
WRAP = 262_143_328_850  # a Xeon's max_energy_range_uj


def _work(at_least_s: float) -> int:
    """Compute until ``at_least_s`` has passed: the window the meter measures."""
    end, n = time.monotonic() + at_least_s, 0
    while time.monotonic() < end:
        n += sum(i * i for i in range(2000))
    return n


def _zone(root: Path, name: str, label: str, uj: int, max_uj: int | None = WRAP) -> Path:
    z = root / name
    z.mkdir(parents=True)
    (z / "name").write_text(label + "\n")
    (z / "energy_uj").write_text(f"{uj}\n")
    if max_uj is not None:
        (z / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return z


def test_a_gpu_counter_gives_its_difference_over_the_window(fake_nvml: Any, tmp_path: Path) -> None:
    lib = fake_nvml("h200.json", energy_mj={0: [7_000_000, 7_250_500]})
    with gpuprobe.energy(nvml=nvml_session, rapl_root=tmp_path / "none") as e:
        _work(COUNTER_MIN_S + 0.05)
    (gpu,) = e.reading.gpus
    assert gpu.method == "counter" and not gpu.estimate and gpu.note is None
    assert gpu.joules == pytest.approx(250.5, abs=1e-9)
    assert gpu.name == "NVIDIA H200"
    assert e.gpu_joules == e.joules == pytest.approx(250.5)
    assert e.host_joules is None and "RAPL" in (e.reading.host.note or "")
    assert lib.calls.count("nvmlDeviceGetTotalEnergyConsumption") == 2  # no thread was needed


def test_a_gpu_without_a_counter_is_power_times_time_marked(fake_nvml: Any, tmp_path: Path) -> None:
    lib = fake_nvml("h200.json")  # no energy counter: NOT_SUPPORTED, as before Volta
    with EnergyMeter(nvml=nvml_session, rapl_root=tmp_path, power_hz=20) as e:
        _work(0.4)
    (gpu,) = e.reading.gpus
    assert gpu.estimate and "no energy counter" in (gpu.note or "")
    assert gpu.joules == pytest.approx(H200_W * e.seconds, rel=1e-6)  # constant power
    assert lib.calls.count("nvmlDeviceGetPowerUsage") >= 4  # the thread sampled meanwhile
    assert "estimate" in repr(e.reading)


def test_a_window_shorter_than_the_counter_update_is_an_estimate(
    fake_nvml: Any, tmp_path: Path
) -> None:
    fake_nvml("h200.json", energy_mj={0: [7_000_000, 7_000_000]})
    with gpuprobe.energy(nvml=nvml_session, rapl_root=tmp_path) as e:
        pass
    (gpu,) = e.reading.gpus
    assert e.seconds < COUNTER_MIN_S
    assert gpu.estimate and "shorter than the energy counter's update" in (gpu.note or "")
    assert gpu.joules == pytest.approx(H200_W * e.seconds, rel=1e-6)


def test_a_counter_that_went_backwards_is_not_a_negative_energy(
    fake_nvml: Any, tmp_path: Path
) -> None:
    fake_nvml("h200.json", energy_mj={0: [9_000_000, 1_000]})  # the driver reloaded
    with gpuprobe.energy(nvml=nvml_session, rapl_root=tmp_path) as e:
        _work(COUNTER_MIN_S + 0.05)
    (gpu,) = e.reading.gpus
    assert gpu.estimate and "went backwards" in (gpu.note or "")
    assert gpu.joules is not None and gpu.joules > 0


def test_rapl_packages_are_summed_over_a_wrap_and_sub_zones_left_out(
    fake_nvml: Any, tmp_path: Path
) -> None:
    fake_nvml("h200.json", init_error=9)  # NVML_ERROR_DRIVER_NOT_LOADED
    p0 = _zone(tmp_path, "intel-rapl:0", "package-0", WRAP - 1_000)
    sub = _zone(tmp_path, "intel-rapl:0:0", "core", 5)
    p1 = _zone(tmp_path, "intel-rapl:1", "package-1", 10_000_000)
    _zone(tmp_path, "intel-rapl-mmio:0", "package-0", 1)  # the same package again, by MMIO
    with gpuprobe.energy(rapl_root=tmp_path) as e:
        (p0 / "energy_uj").write_text("4000\n")  # wrapped: 5,000 µJ since the start
        (sub / "energy_uj").write_text("999999999\n")  # inside package-0: never added
        (p1 / "energy_uj").write_text("12500000\n")  # 2.5 J
    r = e.reading
    assert r.host.zones == ("package-0", "package-1")
    assert r.host_joules == pytest.approx(2.505, abs=1e-12)
    assert r.gpus == () and "NVML is not available" in (r.gpu_note or "")
    assert e.joules == pytest.approx(2.505)
    text = str(r)
    assert "host CPU packages (package-0, package-1): 2.5 J" in text
    assert all(len(line) <= 80 for line in text.splitlines()), text


def test_rapl_readable_by_root_only_is_said(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _zone(tmp_path, "intel-rapl:0", "package-0", 1)
    real = Path.read_text

    def read_text(self: Path, *a: Any, **k: Any) -> str:
        if self.name == "energy_uj":  # 0400 root:root since CVE-2020-8694
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "read_text", read_text)
    zones, why = hw_energy.rapl_zones(tmp_path)
    assert zones == [] and why is not None
    assert why.startswith("the RAPL counters are readable by root only here")


def test_nothing_measured_is_none_never_zero(fake_nvml: Any, tmp_path: Path) -> None:
    fake_nvml("h200.json", init_error=9)  # NVML_ERROR_DRIVER_NOT_LOADED
    with gpuprobe.energy(nvml=nvml_session, rapl_root=tmp_path / "missing") as e:
        inside = e.read()
    assert inside.joules is None and e.joules is None and e.reading.watts is None
    r = repr(e)
    assert r.startswith("<EnergyReading not measured in ") and "no GPU" in r, r
    assert "not measured" in str(e.reading) and "is missing" in (e.reading.host.note or "")


def test_the_reading_round_trips_and_a_meter_is_used_once(fake_nvml: Any, tmp_path: Path) -> None:
    fake_nvml("h200.json", energy_mj={0: [1_000, 301_000]})
    meter = EnergyMeter(nvml=nvml_session, rapl_root=tmp_path)
    assert repr(meter) == "<EnergyMeter not started>"
    with meter:
        _work(COUNTER_MIN_S + 0.05)
    back = type(meter.reading).from_dict(meter.reading.to_dict())
    assert back == meter.reading and back.gpu_joules == pytest.approx(300.0)
    with pytest.raises(RuntimeError, match="one window"), meter:
        pass


def test_counter_delta_wraps_once_and_refuses_backwards() -> None:
    assert hw_energy.counter_delta(10, 15, None) == 5
    assert hw_energy.counter_delta(WRAP - 2, 3, WRAP) == 5
    assert hw_energy.counter_delta(10, 5, None) is None


def test_power_hz_out_of_range_is_a_usage_error() -> None:
    with pytest.raises(gpuprobe.UsageError, match=r"power_hz=1000: give 0\.5 to 100"):
        gpuprobe.energy(power_hz=1000)
