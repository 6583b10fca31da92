"""A folder is checked before its traces are called ranks: one process's successive profiler
cycles (the real ResNet50 cycles of pytorch/kineto's tb_plugin sample, and synthetic ones),
the real ranks of DLRM and HTA, and mixed folders refused with one line."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

import gpuprobe
import gpuprobe.cli as cli
from _support import too_wide
from gpuprobe.tools.diagnose.cycles import (
    ONE_TIME_CALL_MIN_US,
    STEADY_STEP_TOLERANCE,
    diagnose_cycles,
    diagnose_folder,
)
from gpuprobe.tools.diagnose.cycles_model import CycleDiagnosis
from gpuprobe.tools.diagnose.kineto import read_trace
from gpuprobe.tools.diagnose.layout import classify, identify
from gpuprobe.tools.diagnose.ranks import diagnose_ranks
from gpuprobe.tools.diagnose.ranks_model import MultiRankDiagnosis
from gpuprobe.tools.diagnose.synthetic import KinetoBuilder

from .realdata import DATA, DLRM8, DLRM_FILES, SAMPLED, SAMPLED_FILES, length, load, union

CYCLES = DATA / "cycles_r50_nw0"  # two cycles of one ResNet50 run (pid 25738), steps 7 and 18
CYCLE_FILES = sorted(CYCLES.glob("*.json.gz"))
OLD_GPU_CATS = ("Kernel", "Memcpy", "Memset")  # PyTorch 1.8's names for GPU activities


@pytest.fixture(autouse=True)
def _only_diagnose(monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", ("diagnose",))


@pytest.fixture(scope="module")
def r50() -> CycleDiagnosis:
    return diagnose_cycles(CYCLES)


def _by_hand(path):
    """(pid of the ops, step duration, GPU busy inside the step) with plain json."""
    data = load(path)
    events = data["traceEvents"]
    (step,) = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    lo, hi = step["ts"], step["ts"] + step["dur"]
    gpu = union(
        [
            (max(e["ts"], lo), min(e["ts"] + e["dur"], hi))
            for e in events
            if e.get("cat") in OLD_GPU_CATS and e["ts"] < hi and e["ts"] + e["dur"] > lo
        ]
    )
    pids = {e["pid"] for e in events if e.get("cat") == "Operator"}
    return pids, step["dur"], length(gpu)


# -- one process's cycles -----------------------------------------------------------------


def test_the_real_cycles_are_one_process_one_after_the_other():
    ids = [identify_path(p) for p in CYCLE_FILES]
    assert [t.pid for t in ids] == [25738, 25738]
    assert [t.rank for t in ids] == [None, None]  # no distributedInfo in 2021 traces
    assert ids[0].end_us < ids[1].start_us  # ~469 s apart: the second cycle of the same run
    assert ids[1].start_us - ids[0].end_us == pytest.approx(469_802_121.0)
    assert classify(ids, "x").kind == "cycles"
    for p in CYCLE_FILES:
        pids, _, _ = _by_hand(p)
        assert pids == {25738}


def identify_path(path):
    from gpuprobe.tools.diagnose.columns import TraceColumns

    return identify(TraceColumns(read_trace(path)))


def test_cycles_busy_share_and_idle_split_match_plain_json(r50):
    assert r50.process == "pid 25738"
    assert [c.cycle for c in r50.cycles] == [1, 2]
    assert [(c.first_step, c.last_step) for c in r50.cycles] == [(7, 7), (18, 18)]
    for row, path in zip(r50.cycles, CYCLE_FILES, strict=True):
        _, step_us, busy_us = _by_hand(path)
        assert row.path == str(path)
        assert row.step_median_us == pytest.approx(step_us)
        assert row.gpu_busy_us == pytest.approx(busy_us)
        assert row.gpu_busy_fraction == pytest.approx(busy_us / step_us)
        # the idle split covers exactly the idle time of the step
        assert sum(row.idle_cause_us.values()) == pytest.approx(step_us - busy_us)
    one, two = r50.cycles
    assert one.step_median_us == 176_918 and two.step_median_us == 148_659
    assert round(100 * one.gpu_busy_fraction, 1) == 48.4
    assert round(100 * two.gpu_busy_fraction, 1) == 58.6
    # the first cycle waits longer for its single-process DataLoader (41.5 % against 29.8 %)
    assert one.idle_cause_us["input"] == 73_418 and two.idle_cause_us["input"] == 44_346
    assert round(100 * one.idle_share("input"), 1) == 41.5
    assert round(100 * two.idle_share("input"), 1) == 29.8


def test_warm_up_and_steady_are_named_and_the_steady_cycle_is_diagnosed(r50):
    one, two = r50.cycles
    assert (one.phase, two.phase) == ("warm-up", "steady")
    assert r50.reference_step_us == 148_659
    assert one.step_median_us / r50.reference_step_us - 1 > STEADY_STEP_TOLERANCE
    assert "19.0 % above the reference (148,659 µs" in one.why
    assert "48.4 %" in one.why and "58.6 %" in one.why
    assert r50.diagnosed == 2
    # the embedded diagnosis is gpuprobe.diagnose() of that cycle's file
    alone = gpuprobe.diagnose(CYCLE_FILES[1])
    assert r50.diagnosis.summary.steps == alone.summary.steps == (18,)
    assert [(f.id, f.status) for f in r50.findings] == [(f.id, f.status) for f in alone.findings]
    ib = r50.finding("input-bound")
    assert ib is not None and ib.status.value == "warn"
    ev = {e.name: e.value for e in ib.evidence}
    assert ev["dataloader_per_step_median"] == pytest.approx(44_346, abs=1)
    assert r50.status is alone.status


def test_round_trip_repr_html_and_the_public_api(r50):
    assert CycleDiagnosis.from_dict(json.loads(json.dumps(r50.to_dict()))) == r50
    assert repr(r50) == (
        "<CycleDiagnosis pid 25738: 2 cycles (1 warm-up, 1 steady); cycle 2 diagnosed: warn>"
    )
    page = r50._repr_html_()
    assert "warm-up" in page and "<table>" in page and "input-bound" in page
    assert isinstance(diagnose_cycles(CYCLE_FILES), gpuprobe.CycleDiagnosis)
    assert gpuprobe.diagnose_folder(CYCLES).cycles == r50.cycles


def _flat(text: str) -> str:
    """The text with its lines joined (rich wraps long lines at 80 columns)."""
    return " ".join(text.split())


def test_text_names_the_cycles_and_fits_80_columns(r50):
    text = _flat(str(r50))
    assert "2 profiler cycles of one process (pid 25738)" in text and "not ranks" in text
    assert "#1 warm-up: median step 176,918 µs" in text
    assert "skip_first=8" in text
    assert "Cycle 2 (steady, step 18) in full:" in text
    assert "input-bound" in text
    assert too_wide(str(r50)) == []


# -- synthetic cycles: a one-time cost, an unsteady cycle, a host from the file name ---------


def _cycle(folder, *, pid=4242, at_s, first, steps=3, first_launch_us=5.0, input_us=0.0):
    """One profiler cycle of ``steps`` steps from ``first``, written as
    tensorboard_trace_handler names it (``{host}_{pid}.{time}.pt.trace.json.gz``)."""
    b = KinetoBuilder(pid=pid, tid=pid, start_us=at_s * 1e6)
    for n in range(first, first + steps):
        with b.step(n):
            if input_us:
                b.dataloader(input_us)
            for k in range(20):
                cold = n == first and k == 0
                b.launch(
                    "void gemm_kernel",
                    kernel_us=400.0,
                    launch_us=first_launch_us if cold else 5.0,
                    op="aten::mm",
                )
            b.sync()
    path = folder / f"node7_{pid}.{int(at_s * 1000)}.pt.trace.json.gz"
    b.write(str(path))
    return path


def test_a_cold_first_cycle_and_an_unsteady_one(tmp_path):
    _cycle(tmp_path, at_s=10, first=0, first_launch_us=1_337_000.0)  # module load in a launch
    _cycle(tmp_path, at_s=20, first=10)
    _cycle(tmp_path, at_s=30, first=20, input_us=30_000.0)  # a slow input after settling
    _cycle(tmp_path, at_s=40, first=30)
    d = diagnose_folder(tmp_path)
    assert isinstance(d, CycleDiagnosis)
    assert d.process == "pid 4242 on node7"
    assert [c.phase for c in d.cycles] == ["warm-up", "steady", "unsteady", "steady"]
    assert d.diagnosed == 4
    cold = d.cycles[0]
    assert cold.longest_call == "cudaLaunchKernel" and cold.longest_call_us == 1_337_000
    assert cold.longest_call_us >= ONE_TIME_CALL_MIN_US
    assert "a one-time 1,337,000 µs cudaLaunchKernel" in cold.why
    # one huge launch in three steps leaves the median step as it is: only the cost tells
    assert "median step" not in cold.why
    slow = d.cycles[2]
    assert "× the reference" in slow.why and slow.idle_cause_us["input"] > 0
    # ten seconds from one cycle's start to the next (minus the 3-step cycle itself)
    gap = d.cycles[3].gap_before_us
    assert gap == pytest.approx(d.cycles[3].start_us - d.cycles[2].end_us)
    assert 9e6 < gap < 10e6
    assert "skip_first=3" in str(d)


def test_no_steady_cycle_diagnoses_the_last_and_says_so(tmp_path):
    _cycle(tmp_path, at_s=10, first=0, input_us=10_000.0)
    _cycle(tmp_path, at_s=20, first=10, input_us=60_000.0)
    _cycle(tmp_path, at_s=30, first=20)
    d = diagnose_cycles(tmp_path)
    # reference: the median of cycles 2 and 3, which both are more than 10 % away from
    assert "steady" not in [c.phase for c in d.cycles]
    assert d.diagnosed == 3 and "the last one is diagnosed" in d.note


# -- genuine ranks stay ranks ----------------------------------------------------------------


def test_the_real_ranks_are_distinct_and_overlap():
    ids = [identify_path(p) for p in DLRM_FILES]
    assert [t.rank for t in ids] == list(range(8))
    assert {t.world_size for t in ids} == {8}
    assert len({t.pid for t in ids}) == 8  # one process per rank
    assert max(t.start_us for t in ids) < min(t.end_us for t in ids)  # all at the same time
    assert classify(ids, "x").kind == "ranks"
    sampled = [identify_path(p) for p in SAMPLED_FILES]
    assert [(t.rank, t.pid) for t in sampled] == [(0, 4037), (1, 4045)]
    assert classify(sampled, "x").kind == "ranks"


def test_a_ranks_folder_is_still_ranks():
    d = diagnose_folder(DLRM8)
    assert isinstance(d, MultiRankDiagnosis)
    assert [r.rank for r in d.ranks] == list(range(8)) and d.straggler == 7
    assert d.note == ""
    assert isinstance(diagnose_folder(SAMPLED), MultiRankDiagnosis)


def test_ranks_over_several_cycles_are_grouped_and_say_so(tmp_path):
    for pid in (101, 102):
        _cycle(tmp_path, pid=pid, at_s=10, first=0)
        _cycle(tmp_path, pid=pid, at_s=20, first=10)
    d = diagnose_folder(tmp_path)
    assert isinstance(d, MultiRankDiagnosis)
    assert "2 ranks × 2 profiler cycles" in d.note
    assert [r.rank for r in d.ranks] == [101, 102]  # from the file names (node7_101.…)
    assert all(r.first_step_start_us is not None and r.steps == 3 for r in d.ranks)
    assert {Path(r.path).name.split(".")[1] for r in d.ranks} == {"20000"}  # the last cycle
    assert "2 ranks × 2 profiler cycles" in _flat(str(d))


# -- what is refused, and what the API functions refuse --------------------------------------


def _shifted(src, dst, seconds):
    data = load(src)
    for e in data["traceEvents"]:
        if e.get("ph") == "X":
            e["ts"] += seconds * 1e6
    with gzip.open(dst, "wt") as f:
        json.dump(data, f)


def test_mixed_folders_are_refused_with_one_line(tmp_path):
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for p in CYCLE_FILES:
        shutil.copy(p, mixed / p.name)
    shutil.copy(DLRM_FILES[0], mixed / DLRM_FILES[0].name)
    with pytest.raises(gpuprobe.InputError) as err:
        diagnose_folder(mixed)
    msg = str(err.value)
    assert "2 processes' profiler cycles (pid 25738: 2 traces; rank 0: 1 trace)" in msg
    assert "pass one process's traces (a subfolder) or one file" in msg and "\n" not in msg
    # distinct ranks of one job size whose windows do not meet: not one job's ranks
    apart = tmp_path / "apart"
    apart.mkdir()
    shutil.copy(DLRM_FILES[0], apart / DLRM_FILES[0].name)
    _shifted(DLRM_FILES[3], apart / DLRM_FILES[3].name, 3600)
    with pytest.raises(gpuprobe.InputError, match="did not run at the same time"):
        diagnose_folder(apart)
    # one rank twice over the same time (two traces, not a copy: a copy is one trace)
    twice = tmp_path / "twice"
    twice.mkdir()
    shutil.copy(DLRM_FILES[0], twice / "a.json.gz")
    with gzip.open(DLRM_FILES[0], "rt") as f:
        data = json.load(f)
    data["traceName"] = "a second recording"
    with gzip.open(twice / "b.json.gz", "wt") as f:
        json.dump(data, f)
    with pytest.raises(gpuprobe.InputError, match="are both rank 0 over the same time"):
        diagnose_folder(twice)
    shutil.copy(DLRM_FILES[0], twice / "b.json.gz")
    assert [r.rank for r in diagnose_folder(twice).ranks] == [0]


def test_each_function_refuses_the_other_kind():
    with pytest.raises(gpuprobe.InputError, match="successive profiler cycles of one process"):
        diagnose_ranks(CYCLES)
    with pytest.raises(gpuprobe.InputError, match="the traces of 8 ranks"):
        diagnose_cycles(DLRM8)


# -- the command ------------------------------------------------------------------------------


def test_cli_cycles_text_fits_80_columns(capsys):
    assert cli.main(["diagnose", str(CYCLES)]) == 0
    out = capsys.readouterr().out
    assert "2 profiler cycles of one process (pid 25738)" in _flat(out)
    assert "warm-up" in out and "steady" in out and "input-bound" in out
    assert too_wide(out) == []


def test_cli_cycles_json_parses(capsys):
    assert cli.main(["diagnose", *map(str, CYCLE_FILES), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "cycles"
    d = CycleDiagnosis.from_dict(data)
    assert [c.phase for c in d.cycles] == ["warm-up", "steady"]
    assert d.diagnosis.finding("input-bound").status.value == "warn"
    assert cli.main(["diagnose", str(DLRM8), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "ranks"


def test_cli_mixed_folder_is_one_line_exit_2(tmp_path, capsys):
    for p in [*CYCLE_FILES, DLRM_FILES[0]]:
        shutil.copy(p, tmp_path / p.name)
    assert cli.main(["diagnose", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "profiler cycles" in err and "a subfolder" in err
