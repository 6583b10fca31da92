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
    lines = summary_text(summarize(read_timeline(DATA / "throttled.jsonl"))).splitlines()
    assert lines[0] == "gpuprobe run: python train.py → exit code 0, 30.5 s, 60 samples at 2 Hz"
    assert lines[1:3] == [
        "  GPU 0 (NVIDIA RTX A5000): busy 97.0 % mean (p90 99.0 %), memory peak",
        "                            20.0/24.0 GiB, power max 225.0 W, temp max 90 °C",
    ]
    assert too_wide("\n".join(lines)) == []
