"""``plot`` on damaged timelines: whole lines with wrong types (``"host": 5``, ``"tree": []``,
``"t": NaN``), oversized samples and a damaged header. Damaged samples are skipped and counted;
the header is refused in one line; and a fuzz test over mutated recorded fixtures."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import gpuprobe.cli as cli
from fuzzing import SEEDS, assert_clean_exit, fuzz_settings
from gpuprobe.core.errors import InputError
from gpuprobe.tools.monitor.judge import summarize
from gpuprobe.tools.monitor.show.plots import timeline_figure
from gpuprobe.tools.monitor.timeline import MAX_CORES, parse_timeline

DATA = Path(__file__).resolve().parents[2] / "data" / "monitor"
FIXTURES = {p.name: p.read_bytes() for p in sorted(DATA.glob("*.jsonl"))}
HEALTHY = FIXTURES["healthy.jsonl"].split(b"\n")
HEADER, SAMPLE = HEALTHY[0], json.loads(next(x for x in HEALTHY if b'"sample"' in x))
WEIRD: list[Any] = [5, [], None, "x", float("nan"), float("inf"), -1, {}, [1.0] * 10, True]


@pytest.mark.parametrize(
    "damage",
    [
        {"host": 5},
        {"tree": []},
        {"t": float("nan")},
        {"gpus": 5},
        {"host": {"cpu_percent": "abc"}},
        {"host": {"cpu_percent": [1.0] * (MAX_CORES + 1)}},  # 200,000 cores timed SVG out
    ],
    ids=["host-int", "tree-list", "t-nan", "gpus-int", "cpu-str", "too-many-cores"],
)
def test_a_damaged_sample_is_skipped_and_counted(damage: dict[str, Any]) -> None:
    bad = json.dumps({**SAMPLE, **damage}).encode()
    good = json.dumps(SAMPLE).encode()
    tl = parse_timeline(b"\n".join([HEADER, good, bad, good]) + b"\n")
    assert len(tl.samples) == 2
    assert tl.dropped_lines == 1 and tl.dropped_bytes == len(bad) + 1
    timeline_figure(tl)  # and it draws
    summarize(tl)


@pytest.mark.parametrize("started", [None, "x", [0]])
def test_a_header_without_a_start_time_is_refused(started: Any) -> None:
    h = {**json.loads(HEADER), "started": started}
    with pytest.raises(InputError, match="damaged header: started"):
        parse_timeline(json.dumps(h).encode() + b"\n")


def _mutate_lines(data: bytes, rng: random.Random, n: int) -> bytes:
    lines = data.split(b"\n")
    for _ in range(n):
        i = rng.randrange(len(lines))
        try:
            obj = json.loads(lines[i])
        except ValueError:
            continue
        if not isinstance(obj, dict) or not obj:
            continue
        key = rng.choice(sorted(obj))
        if key == "type" and rng.random() < 0.7:
            continue
        target = obj
        if isinstance(obj[key], dict) and obj[key] and rng.random() < 0.5:
            target = obj[key]
            key = rng.choice(sorted(target))
        target[key] = rng.choice(WEIRD)
        lines[i] = json.dumps(target if target is obj else obj).encode()
    return b"\n".join(lines)


@fuzz_settings(8)
@given(
    name=st.sampled_from(sorted(FIXTURES)),
    seed=SEEDS,
    n=st.integers(1, 8),
    cut=st.booleans(),
)
def test_plot_on_mutated_timelines(
    name: str, seed: int, n: int, cut: bool, tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(cli, "COMMANDS", ("plot",))
    data = _mutate_lines(FIXTURES[name], random.Random(seed), n)
    if cut:
        data = data[: random.Random(seed).randrange(1, len(data))]
    path = tmp_path / "timeline.jsonl"
    path.write_bytes(data)
    code = cli.main(["plot", str(path), "--out", str(tmp_path / "x.svg"), "--json"])
    out, err = capsys.readouterr()
    assert_clean_exit(code, err, (0, 2))
    if code == 0:
        assert json.loads(out)["samples"] >= 0
