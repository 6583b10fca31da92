"""What ``gpuprobe top --json`` printed on a real NVIDIA H200 (tests/data/top/h200.jsonl, the
GPU sweep of 2026-11-26, driver 580.159.04, the card idle) against what the same sampler reads
through the real pynvml over the fake NVML library: the fake must give the fields a real card
gives, so the tests over it see what users will."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from _support import snapshot_dict

RECORDED = Path(__file__).resolve().parents[2] / "data" / "top" / "h200.jsonl"


def _gpu_fields(sample: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(every key, the keys with a value) of the first GPU's tick."""
    tick = sample["gpus"][0]["sample"]
    return set(tick), {k for k, v in tick.items() if v is not None}


def test_the_card_s_samples_read_back_as_the_sampler_s_records() -> None:
    from gpuprobe.tools.monitor.records import Sample

    lines = [json.loads(line) for line in RECORDED.read_text().splitlines()]
    assert [d["type"] for d in lines] == ["sample"] * 3
    for d in lines:
        s = Sample.from_dict({k: v for k, v in d.items() if k != "type"})
        g = s.gpus[0].sample
        assert g.index == 0 and g.pcie_gen == 5 and g.pcie_width == 16
        assert 50 < (g.power_w or 0) < 700 and g.clock_event_reasons == ("gpu_idle",)


def test_the_fake_nvml_gives_the_fields_the_card_gave(fake_nvml: Any) -> None:
    from gpuprobe.tools.monitor.sampler import Sampler

    fake_nvml(snapshot_dict("h200.json"))
    with Sampler(hz=10) as sampler:
        fake = sampler.take().to_dict()
    real = json.loads(RECORDED.read_text().splitlines()[-1])
    real_keys, real_set = _gpu_fields(real)
    fake_keys, fake_set = _gpu_fields(fake)
    # the card was recorded before the sampler read the energy counter
    assert fake_keys - {"energy_mj"} == real_keys
    # what the card reported, the fake reports too (PCIe throughput only when asked, in both)
    assert real_set <= fake_set, real_set - fake_set
    assert set(fake["host"]) == set(real["host"])
