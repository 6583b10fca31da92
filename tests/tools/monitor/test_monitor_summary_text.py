"""The run summary as text (``print(recording)``, ``gpuprobe plot DIR``): its first line reads as
profile's, and its lines wrap under their lead at 80 columns with every unit beside its number."""

from __future__ import annotations

from pathlib import Path

from _support import too_wide
from gpuprobe.tools.monitor.judge import summarize
from gpuprobe.tools.monitor.show.terminal import summary_text
from gpuprobe.tools.monitor.timeline import read_timeline

DATA = Path(__file__).parents[2] / "data" / "monitor"


def test_the_first_line_and_the_gpu_line_of_a_recorded_run() -> None:
    summary = summarize(read_timeline(DATA / "throttled.jsonl"))
    lines = summary_text(summary).splitlines()
    assert lines[0] == "gpuprobe run: python train.py → exit code 0, 30.5 s, 60 samples at 2 Hz"
    assert lines[1:4] == [
        "  GPU 0 (NVIDIA RTX A5000): busy 97.0 % mean (p90 99.0 %), memory peak",
        "                            20.0/24.0 GiB, power max 225.0 W, energy 6.64 kJ",
        "                            (power × time), temp max 90 °C",
    ]
    # no energy counter in this recording: its power samples over its 30.5 s, about the mean
    gpu = summary.gpus[0]
    assert gpu.energy_method == "power × time"
    assert gpu.power_mean_w is not None and gpu.energy_j is not None
    assert 0.9 < gpu.energy_j / (gpu.power_mean_w * 30.5) < 1.0  # the first sample is at ~0.5 s
    assert too_wide("\n".join(lines)) == []


def test_a_gpus_energy_counter_gives_the_runs_joules_and_a_reset_is_skipped() -> None:
    from tl_builder import build

    # 150 J a sample (300 W at 2 Hz) from a counter at 5 MJ; the driver reloads at sample 20
    counter = [5_000_000_000 + 150_000 * i for i in range(20)] + [150_000 * i for i in range(20)]
    s = summarize(build(40, energy_mj=lambda i: counter[i]))
    (gpu,) = s.gpus
    assert gpu.energy_method == "counter"
    assert gpu.energy_j == 38 * 150.0  # 39 steps between 40 samples, less the reset's
    assert "energy 5.7 kJ, temp max" in " ".join(summary_text(s).split())
    plain = summarize(build(40))  # no counter: the builder's 150 W × 19.5 s
    assert plain.gpus[0].energy_method == "power × time"
    assert plain.gpus[0].energy_j == 150.0 * 19.5
