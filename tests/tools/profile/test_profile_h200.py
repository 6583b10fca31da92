"""What `gpuprobe profile` recorded on an NVIDIA H200 (the GPU sweep of 2026-11-26, driver
580.159.04, torch 2.11.0+cu130): ``examples/train.py --steps 60`` as it is, then with
``--workers 4``. The traces are the ones the hook wrote on the card
(tests/data/diagnose/gpu_h200/profile_*.json.gz; ORIGIN.md beside them); diagnosed here, they
must give what someone reading the timeline by hand would name."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprobe.core.findings import Status
from gpuprobe.tools.diagnose.engine import diagnose

H200 = Path(__file__).resolve().parents[2] / "data" / "diagnose" / "gpu_h200"


def _evidence(d, rule: str) -> dict[str, float]:
    f = d.finding(rule)
    assert f is not None, rule
    return {e.name: e.value for e in f.evidence}


def test_the_starved_script_on_the_card_is_input_bound() -> None:
    d = diagnose(str(H200 / "profile_train.json.gz"))
    # the hook's window: skip 10, warm up 2, record 5, numbered as the script's own steps
    assert [r.step for r in d.steps] == [12, 13, 14, 15, 16]
    assert d.summary.has_gpu and "H200" in d.summary.devices[0].name
    assert d.headline is not None and d.headline.id == "input-bound"
    assert d.headline.gain == pytest.approx(0.96, abs=0.01)
    ev = _evidence(d, "input-bound")
    assert ev["num_workers"] == 0 and ev["dataloader_share_median"] == pytest.approx(96.1, abs=0.2)
    # the GPU idles 99.7 % of a 55 ms step, nearly all of it behind the DataLoader
    assert [round(r.duration_us / 1e3, 1) for r in d.steps] == [58.5, 54.3, 56.1, 54.6, 52.9]
    assert all((r.gpu_busy_fraction or 0) < 0.005 for r in d.steps)
    # the idle time is the DataLoader's: gpu-idle is its symptom, not a second warning
    idle = d.finding("gpu-idle")
    assert idle.status is Status.INFO and idle.gain is None
    explained = next(e.value for e in idle.evidence if e.name == "explained_by_findings")
    assert explained == pytest.approx(100 * d.headline.gain, abs=0.1)


def test_the_fed_script_on_the_card_stalls_on_its_loader_and_is_launch_bound() -> None:
    d = diagnose(str(H200 / "profile_workers.json.gz"))
    assert [r.step for r in d.steps] == [12, 13, 14, 15, 16]
    # four workers make a batch each in ~55 ms (the single-process step) while a step takes
    # ~2.6 ms: they do not keep up, and step #13 waits 29 ms for the DataLoader; the median
    # step hides it, the spread of the steps does not (unsteady-window, tests/tools/diagnose/
    # test_unsteady_window.py): it is the headline, the stall's time above the steady median
    assert d.headline is not None and d.headline.id == "unsteady-window"
    assert "#13" in d.headline.title and "DataLoader" in d.headline.title
    # in the steady steps, what is left is 23 tiny kernels a step behind their launches
    assert d.finding("launch-bound").status is Status.WARN
    ev = _evidence(d, "launch-bound")
    assert ev["kernels_per_step"] == 23
    assert ev["median_kernel"] < ev["median_launch"] / 3
    assert ev["gpu_waits_for_launch"] == pytest.approx(80.4, abs=0.5)
    f = d.finding("input-bound")
    assert f is None or f.status is not Status.WARN
