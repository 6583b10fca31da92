"""pack with real CPU-bound children; the recommendation rule; bad input."""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from typing import Any

import pytest

from gpuprobe.core.errors import GpuprobeError, UsageError
from gpuprobe.core.findings import Status
from gpuprobe.tools.monitor.pack import (
    RATE_UNIT_FALLBACK,
    pack,
    parse_counts,
    rate_unit,
    read_sharing,
    recommend,
)
from gpuprobe.tools.monitor.pack_model import PackLevel, PackReport, core_capacity
from gpuprobe.tools.monitor.rules.pack import judge

# a CPU-bound child: a pure-Python loop (no sleep), ~0.1-0.3 s on one core
BUSY = [sys.executable, "-c", "x = 0\nfor i in range(1_500_000): x += i\nprint('rate:', 7.5)"]


def test_pack_runs_n_copies_at_once_and_reports_each_level() -> None:
    r = pack(BUSY, "1,2", hz=5)
    assert [lv.n for lv in r.levels] == [1, 2]
    for lv in r.levels:
        assert len(lv.copies) == lv.n and lv.failed == 0
        assert all(c.exit_code == 0 and c.wall_s > 0 for c in lv.copies)
        assert lv.throughput == pytest.approx(lv.n * 3600 / lv.mean_copy_s)
        assert lv.wall_s >= max(c.wall_s for c in lv.copies) * 0.99
        assert lv.samples >= 1
    assert r.levels[0].slowdown == 1.0
    assert r.levels[1].slowdown == pytest.approx(r.levels[1].mean_copy_s / r.levels[0].mean_copy_s)
    # each copy's own CPU seconds (wait4): a busy loop uses most of its wall time on a core
    for lv in r.levels:
        assert all(c.cpu_s is not None and 0 < c.cpu_s <= c.wall_s * 1.05 for c in lv.copies)
        assert lv.cpu_percent == pytest.approx(
            100 * sum(c.cpu_s or 0 for c in lv.copies) / lv.wall_s, abs=0.1
        )
    assert r.recommended in (1, 2) and r.cores >= 1 and r.unit == "jobs/h"
    ids = {f.id for f in r.findings}
    assert "pack-recommend" in ids
    assert PackReport.from_dict(r.to_dict()) == r
    assert "recommended" in str(r)


def test_rate_read_from_each_copy_is_summed() -> None:
    r = pack(BUSY, [2], rate=r"rate: ([0-9.]+)")
    assert r.levels[0].throughput == pytest.approx(15.0)
    assert all(c.rate == 7.5 for c in r.levels[0].copies)
    assert r.unit == RATE_UNIT_FALLBACK  # the pattern names no unit after the number
    assert r.levels[0].unit == r.unit
    missing = pack(BUSY, [1], rate=r"it/s ([0-9.]+)")
    assert missing.levels[0].throughput is None
    assert any(f.id == "pack-no-rate" for f in missing.findings)


def test_a_failing_copy_is_reported() -> None:
    cmd = [sys.executable, "-c", "import sys; sys.exit('no data file')"]
    r = pack(cmd, [1])
    lv = r.levels[0]
    assert lv.failed == 1 and lv.copies[0].exit_code == 1
    assert lv.copies[0].error == "no data file"
    f = next(f for f in r.findings if f.id == "pack-copy-failed")
    assert f.status is Status.FAIL and r.recommended is None


def _lv(n: int, tp: float | None, failed: int = 0, cpu: float | None = None) -> PackLevel:
    return PackLevel(
        n=n, copies=(), wall_s=1.0, mean_copy_s=1.0, throughput=tp, failed=failed, cpu_percent=cpu
    )


def test_recommend_stops_at_what_the_cores_hold() -> None:
    # the benchmark's loaded 2-core run: 3 copies won 20 % by taking CPU from other processes
    levels = [_lv(1, 2728, cpu=98), _lv(2, 5033, cpu=190), _lv(3, 6027, cpu=200), _lv(4, 5317)]
    assert recommend(levels) == 3  # throughput alone
    assert core_capacity(levels, 2) == 2
    assert recommend(levels, cores=2) == 2
    assert recommend(levels, cores=4) == 3  # a bigger host holds 4 such copies
    # a copy that barely uses the CPU (waits on a GPU or I/O) is not capped by the cores
    light = [_lv(1, 100, cpu=3), _lv(2, 200), _lv(3, 300)]
    assert core_capacity(light, 2) is None and recommend(light, cores=2) == 3
    r = PackReport(command=("job",), levels=tuple(levels), unit="jobs/h", recommended=2, cores=2)
    f = next(f for f in judge(r) if f.id == "pack-recommend")
    assert "3 copies need more than the 2 cores" in f.title


def test_recommend_needs_a_real_gain_per_step() -> None:
    # E9 (docs/experiments.md#e9) on a 2-core box: 2 copies double the rate, 3 and 4 add nothing
    assert recommend([_lv(1, 100), _lv(2, 195), _lv(3, 200), _lv(4, 205)]) == 2
    assert recommend([_lv(1, 100), _lv(2, 105), _lv(3, 300)]) == 3
    assert recommend([_lv(1, 100), _lv(2, 300, failed=1)]) == 1
    assert recommend([_lv(1, None)]) is None


@pytest.mark.parametrize("text", ["0", "1,0", "-1", "1,x", "1.5", "", "4-2", "100"])
def test_bad_counts(text: str) -> None:
    with pytest.raises(UsageError, match=r"^counts=") as err:  # from Python: the parameter
        parse_counts(text)
    assert err.value.cli_message.startswith("-n ")  # on the command line: the flag


def test_counts_with_a_range() -> None:
    assert parse_counts("1-3,6") == [1, 2, 3, 6]


def test_command_not_found_exits_127() -> None:
    with pytest.raises(GpuprobeError) as info:
        pack(["gpuprobe-no-such-command-xyz"], [1])
    assert info.value.exit_code == 127


def test_sharing_from_nvml_snapshots(fake_nvml: Any) -> None:
    from gpuprobe.platform.hardware.nvml import nvml_session

    fake_nvml("h200.json")
    with nvml_session() as s:
        gpus = [s.gpu(i) for i in range(s.device_count())]
    sharing = read_sharing(gpus)
    assert sharing.gpus == len(gpus) >= 1
    assert sharing.mig_capable and not sharing.mig_enabled  # H200: MIG supported, off
    fake_nvml("t4.json")
    with nvml_session() as s:
        t4 = [s.gpu(i) for i in range(s.device_count())]
    assert read_sharing(t4).mig_capable == ()  # T4: no MIG


def test_gpu_findings_say_when_mig_and_mps_help(fake_nvml: Any) -> None:
    fake_nvml("h200.json")
    r = pack(BUSY, [1])
    ids = {f.id: f for f in r.findings}
    assert "pack-cpu-only" not in ids
    assert "supports MIG" in ids["pack-mig"].title
    assert "MPS" in ids["pack-mps"].title


@pytest.mark.parametrize(
    ("pattern", "unit"),
    [
        (r"([0-9.]+) it/s", "it/s"),
        (r"loss ([\d.]+) tok/s$", "tok/s"),
        (r"rate=([0-9.]+)\s+samples/s", "samples/s"),
        (r"(?:x)([0-9]+)\ img\/s", "img/s"),
        (r"([^]]+) ms", "ms"),
        (r"([\d.]+)\s*(\w+)", RATE_UNIT_FALLBACK),
        (r"rate: ([0-9.]+)", RATE_UNIT_FALLBACK),
    ],
)
def test_a_rate_gets_the_unit_its_pattern_names(pattern: str, unit: str) -> None:
    """Issue 27: "372 rate" named no unit; the unit is the word after the number's group."""
    assert rate_unit(pattern) == unit


def _rec_title(slowdown: float, unit: str = "jobs/h") -> str:
    levels = (
        PackLevel(n=1, copies=(), wall_s=1.0, mean_copy_s=1.0, throughput=372.0, slowdown=1.0),
        PackLevel(
            n=2, copies=(), wall_s=1.0, mean_copy_s=slowdown, throughput=800.0, slowdown=slowdown
        ),
    )
    r = PackReport(command=("job",), levels=levels, unit=unit, recommended=2, cores=4)
    return next(f for f in judge(r) if f.id == "pack-recommend").title


def test_a_copy_that_got_faster_is_not_called_slower() -> None:
    """Issue 27: "each copy 0.93x slower" read as a slowdown that was a speed-up."""
    assert _rec_title(0.93, "it/s") == (
        "run 2 at once: 800 it/s in total, 2.15x N=1, each copy 8 % faster"
    )
    assert _rec_title(1.10).endswith("each copy 9 % slower")
    assert _rec_title(2.5).endswith("each copy 2.50× slower")
    assert "0.93" not in _rec_title(0.93)


# Prints 7.0 the first time it runs, 5.19 after (a numbered file each run): one copy alone makes
# 7.0 M samples/s, each of two copies 5.19 M; the wall times are whatever the machine gives.
COUNTED_RATE = (
    "import os, sys\n"
    "d = sys.argv[1]\n"
    "i = 0\n"
    "while True:\n"
    "    try:\n"
    "        os.close(os.open(os.path.join(d, str(i)), os.O_CREAT | os.O_EXCL)); break\n"
    "    except FileExistsError:\n"
    "        i += 1\n"
    "print('rate:', 7.0 if i == 0 else 5.19, 'Msamples/s')\n"
)


def test_with_a_rate_the_slowdown_is_each_copys_rate_not_the_wall_time(tmp_path) -> None:
    """Issue 41: "each copy as fast" when each copy ran 0.74x (5.19 M vs 7.0 M samples/s): the
    slowdown column used the wall time even when the rate was given."""
    cmd = [sys.executable, "-c", COUNTED_RATE, str(tmp_path)]
    r = pack(cmd, [1, 2], rate=r"rate: ([0-9.]+) Msamples/s")
    one, two = r.levels
    assert [c.rate for c in one.copies] == [7.0] and [c.rate for c in two.copies] == [5.19] * 2
    assert one.slowdown == 1.0
    assert two.slowdown == pytest.approx(7.0 / 5.19)  # 1.349, whatever the wall times were
    text = str(r)
    rows = {m[1]: m[2] for m in re.finditer(r"(?m)^[ *] +([12]) +\S+ +\S+ +(\S+)", text)}
    assert rows == {"1": "1.00x", "2": "1.35x"}  # the slowdown column
    assert "slowdown: of each copy's rate" in " ".join(text.split())
    rec = next(f for f in r.findings if f.id == "pack-recommend")
    if r.recommended == 2:  # 10.38 M in total against 7.0 M: 1.48x
        assert "each copy 26 % slower" in rec.title and "as fast" not in rec.title


def test_slowdown_of_without_a_rate_is_the_copy_time_and_unknown_rates_are_unknown() -> None:
    from gpuprobe.tools.monitor.pack_model import slowdown_of

    base = PackLevel(n=1, copies=(), wall_s=2.0, mean_copy_s=2.0, throughput=7.0)
    lv = PackLevel(n=2, copies=(), wall_s=3.0, mean_copy_s=3.0, throughput=10.38)
    assert slowdown_of(lv, base, rated=False) == pytest.approx(1.5)
    assert slowdown_of(lv, base, rated=True) == pytest.approx(7.0 / 5.19)
    assert slowdown_of(replace(lv, throughput=None), base, rated=True) is None
