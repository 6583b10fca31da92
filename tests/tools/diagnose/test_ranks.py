"""Several ranks: the 8 real DLRM ranks (V100, NCCL), against plain-json unions and HTA's numbers."""

from __future__ import annotations

import gzip
import json
import shutil
import tracemalloc

import pytest

import gpuprobe
import gpuprobe.cli as cli
from _support import too_wide
from gpuprobe.core.findings import Status
from gpuprobe.tools.diagnose.ranks import diagnose_ranks, interval_overlap, rank_from_name
from gpuprobe.tools.diagnose.ranks_model import MultiRankDiagnosis

from .realdata import (
    CPU_ONLY,
    DLRM8,
    DLRM_FILES,
    SAMPLED,
    SAMPLED_FILES,
    gpu_events,
    intersection,
    length,
    load,
    union,
)

# HTA 0.5.0 (pandas 2.3.3) on the same 8 files, TraceAnalysis(trace_dir=…,
# include_last_profiler_step=True): get_comm_comp_overlap()["comp_comm_overlap_pctg"] and
# 100 − get_temporal_breakdown()["idle_time_pctg"], both rounded by HTA to 2 decimals.
# Re-run with benchmarks/diagnose_ranks_vs_hta.py.
HTA_OVERLAP_PCT = [4.50, 2.47, 7.88, 3.31, 0.56, 0.64, 7.56, 9.51]
HTA_BUSY_PCT = [50.66, 65.72, 37.92, 56.80, 46.43, 44.36, 38.20, 24.25]
# the same, on HTA's two sampled ranks (two steps each)
HTA_SAMPLED_OVERLAP_PCT = [14.95, 19.93]
HTA_SAMPLED_BUSY_PCT = [44.79, 47.11]


@pytest.fixture(autouse=True)
def _only_diagnose(monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", ("diagnose",))


@pytest.fixture(scope="module")
def dlrm() -> MultiRankDiagnosis:
    return diagnose_ranks(DLRM8)


def _independent(path):
    """NCCL union, compute union, their overlap and the GPU busy fraction, by hand."""
    events = gpu_events(load(path))
    kernels = [e for e in events if e["cat"] == "kernel"]
    comm = union([(e["ts"], e["ts"] + e["dur"]) for e in kernels if "nccl" in e["name"]])
    comp = union([(e["ts"], e["ts"] + e["dur"]) for e in kernels if "nccl" not in e["name"]])
    every = union([(e["ts"], e["ts"] + e["dur"]) for e in events])
    busy = length(every) / (every[-1][1] - every[0][0])
    return length(comm), length(comp), intersection(comm, comp), busy


def test_reads_every_rank_from_distributed_info(dlrm):
    assert [r.rank for r in dlrm.ranks] == list(range(8))
    assert {r.rank_source for r in dlrm.ranks} == {"distributedInfo"}
    assert all(r.world_size == 8 and r.steps == 1 for r in dlrm.ranks)
    assert dlrm.matched_collectives == 8


@pytest.mark.parametrize("rank", range(8))
def test_comm_compute_overlap_and_busy_match_plain_json_and_hta(dlrm, rank):
    row = dlrm.rank(rank)
    comm, comp, ovl, busy = _independent(DLRM_FILES[rank])
    assert row.comm_us == pytest.approx(comm)
    assert row.compute_us == pytest.approx(comp)
    assert row.overlap_us == pytest.approx(ovl)
    assert row.exposed_comm_us == pytest.approx(comm - ovl)
    assert row.gpu_busy_fraction == pytest.approx(busy)
    # within 0.1 percentage point of HTA (which rounds to 2 decimals)
    assert abs(100 * row.overlap_fraction - HTA_OVERLAP_PCT[rank]) <= 0.1
    assert abs(100 * row.gpu_busy_fraction - HTA_BUSY_PCT[rank]) <= 0.1


@pytest.mark.parametrize("rank", [0, 1])
def test_two_step_ranks_match_plain_json_and_hta(rank):
    d = diagnose_ranks(SAMPLED)
    row = d.rank(rank)
    comm, comp, ovl, busy = _independent(SAMPLED_FILES[rank])
    assert row.steps == 2 and row.world_size == 128
    assert (row.comm_us, row.compute_us, row.overlap_us) == pytest.approx((comm, comp, ovl))
    assert row.gpu_busy_fraction == pytest.approx(busy)
    assert abs(100 * row.overlap_fraction - HTA_SAMPLED_OVERLAP_PCT[rank]) <= 0.1
    assert abs(100 * row.gpu_busy_fraction - HTA_SAMPLED_BUSY_PCT[rank]) <= 0.1


def test_two_step_straggler_is_slower_in_compute():
    d = diagnose_ranks(SAMPLED_FILES)
    assert d.straggler == 1
    f = d.finding("straggler")
    ev = {e.name: e.value for e in f.evidence}
    r0, r1 = d.rank(0), d.rank(1)
    assert ev["compute_vs_median"] == pytest.approx((r1.compute_us - r0.compute_us) / 2)
    assert ev["compute_vs_median"] > 30_000
    assert "GPU compute" in f.title and "balance the work" in f.fix


def test_straggler_is_the_rank_the_others_wait_for_not_the_slowest_step(dlrm):
    steps = {r.rank: r.step_median_us for r in dlrm.ranks}
    assert max(steps, key=steps.get) == 1  # the longest step belongs to a rank that waits
    assert dlrm.straggler == 7
    first = dlrm.collectives[0]
    assert first.name == "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"
    assert first.occurrence == 0 and first.sequence == 0 and first.last_rank == 7
    # independently: the first SendRecv kernel of every rank; they end together, so each rank's
    # wait is its duration minus the shortest one
    durs = []
    for path in DLRM_FILES:
        sendrecv = [e for e in gpu_events(load(path)) if "SendRecv" in e["name"]]
        durs.append(min(sendrecv, key=lambda e: e["ts"])["dur"])
    assert durs.index(min(durs)) == 7
    assert first.wait_us == pytest.approx(sum(d - min(durs) for d in durs)) == 26436.0
    assert first.durations_us == tuple(float(d) for d in durs)
    f = dlrm.finding("straggler")
    assert f.status is Status.WARN and f.subject == "rank 7"
    assert "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t #0" in f.title
    ev = {e.name: e.value for e in f.evidence}
    r7 = dlrm.rank(7)
    assert ev["others_wait_per_step"] == pytest.approx(r7.caused_wait_us / 7)
    # rank 7's own step is no heavier: it starts its step late (before the profiled window)
    assert abs(ev["compute_vs_median"]) < 100
    assert ev["step_start_vs_median"] > 4000
    assert "starts its steps late" in f.fix


def test_waits_sum_over_ranks_to_the_collectives_waits(dlrm):
    total_wait = sum(r.comm_wait_us for r in dlrm.ranks)
    assert total_wait == pytest.approx(sum(r.caused_wait_us for r in dlrm.ranks))
    # comm − wait is the shortest duration of each collective, the same on every rank
    transfer = {round(r.comm_us - r.comm_wait_us, 6) for r in dlrm.ranks}
    assert len(transfer) == 1


def test_exposed_communication_is_mostly_waiting_here(dlrm):
    f = dlrm.finding("exposed-communication")
    ev = {e.name: e.value for e in f.evidence}
    assert f.status is Status.OK
    assert ev["waiting_per_step"] > 0.9 * ev["exposed_per_step"]
    assert ev["exposed_transfer_per_step"] == pytest.approx(217.0)


def test_interval_overlap_against_the_sweep():
    import numpy as np

    a = [(0.0, 5.0), (7.0, 9.0), (20.0, 30.0)]
    b = [(1.0, 2.0), (4.0, 8.0), (8.5, 25.0), (31.0, 40.0)]
    arr = lambda x: (np.array([s for s, _ in x]), np.array([e for _, e in x]))  # noqa: E731
    assert interval_overlap(arr(a), arr(b)) == intersection(a, b) == 1 + 1 + 1 + 0.5 + 5


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("rank-3.Jul_15.pt.trace.json.gz", 3),
        ("rank3.json", 3),
        ("trace_rank_12.json", 12),
        ("worker5_step_12.1694128201549.pt.trace.json.gz", 5),
        ("host_7.json.gz", 7),
        ("trace.json", None),
    ],
)
def test_rank_from_file_name(name, rank):
    assert rank_from_name(name) == rank


def _strip_rank(src, dst):
    with gzip.open(src, "rt") as f:
        data = json.load(f)
    del data["distributedInfo"]
    with gzip.open(dst, "wt") as f:
        json.dump(data, f)


def test_without_distributed_info_rank_from_name_then_gpu_then_order(tmp_path):
    a, b = tmp_path / "rank-5.json.gz", tmp_path / "rank-2.json.gz"
    _strip_rank(DLRM_FILES[0], a)
    _strip_rank(DLRM_FILES[3], b)
    d = diagnose_ranks([a, b])
    assert [(r.rank, r.rank_source) for r in d.ranks] == [(2, "file name"), (5, "file name")]
    assert d.rank(2).comm_us == pytest.approx(_independent(DLRM_FILES[3])[0])
    # no number in the names: the one GPU each trace uses (DLRM: device = rank)
    c, e = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    shutil.move(a, c)
    shutil.move(b, e)
    d = diagnose_ranks([c, e])
    assert [(r.rank, r.rank_source) for r in d.ranks] == [(0, "GPU id"), (3, "GPU id")]
    # two traces of one GPU (no name, no distributedInfo): the order of the files
    f = tmp_path / "f.json.gz"
    with gzip.open(c, "rt") as src:
        data = json.load(src)
    data["traceName"] = "another process"  # a trace of its own, not a copy of c
    with gzip.open(f, "wt") as dst:
        json.dump(data, dst)
    d = diagnose_ranks([c, f])
    assert [(r.rank, r.rank_source) for r in d.ranks] == [(0, "file order"), (1, "file order")]


def test_the_same_trace_twice_is_one_trace(tmp_path, capsys):
    """A file given twice, by another path or as a copy, is one trace: its own verdict, not a
    two-rank job whose straggler is itself."""
    t = DLRM_FILES[0]
    assert cli.main(["diagnose", str(t), "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)
    link = tmp_path / "link.json.gz"
    link.symlink_to(t)
    copy = tmp_path / "copy.json.gz"
    shutil.copyfile(t, copy)
    for other, why in ((t, "the same file as"), (link, "the same file as"), (copy, "content")):
        assert cli.main(["diagnose", str(t), str(other), "--json"]) == 0
        out, err = capsys.readouterr()
        twice = json.loads(out)
        assert "ranks" not in twice and twice["headline"] == alone["headline"]
        assert twice["summary"]["gpu_busy_fraction"] == alone["summary"]["gpu_busy_fraction"]
        assert f"skipped 1 of the given files: {other.name}" in err and why in err
    # a folder holding one trace and its copy: one trace too
    folder = tmp_path / "job"
    folder.mkdir()
    shutil.copyfile(t, folder / "a.json.gz")
    shutil.copyfile(t, folder / "b.json.gz")
    assert cli.main(["diagnose", str(folder), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["headline"] == alone["headline"]
    assert "b.json.gz (the same content as" in err
    # the API: the repeats are left out before the ranks are read
    assert len(diagnose_ranks([t, copy, DLRM_FILES[1]]).ranks) == 2


def test_memory_stays_flat_with_the_number_of_ranks():
    tracemalloc.start()
    diagnose_ranks(DLRM_FILES[:1])
    one = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    diagnose_ranks(DLRM8)
    eight = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert eight < 1.5 * one  # one trace at a time, not eight


def test_round_trip_and_public_api(dlrm):
    assert MultiRankDiagnosis.from_dict(json.loads(json.dumps(dlrm.to_dict()))) == dlrm
    d = gpuprobe.diagnose_ranks(DLRM_FILES[6:])
    assert [r.rank for r in d.ranks] == [6, 7]
    assert "<table>" in d._repr_html_()


def test_cli_folder_text_fits_80_columns(capsys):
    assert cli.main(["diagnose", str(DLRM8)]) == 0
    out = capsys.readouterr().out
    assert "rank 7 is the straggler" in out
    assert "26,436" in out and "9.51" in out and "24.25" in out
    assert too_wide(out) == []


def test_cli_several_files_json(capsys):
    assert cli.main(["diagnose", *map(str, DLRM_FILES[:2]), "--json"]) == 0
    d = MultiRankDiagnosis.from_dict(json.loads(capsys.readouterr().out))
    assert [r.rank for r in d.ranks] == [0, 1]
    assert d.straggler == 0  # of these two, rank 1 waits for rank 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["diagnose", "{empty}"], "no trace files"),
        (["diagnose", str(DLRM_FILES[0]), "/nonexistent.json"], "no such file or folder"),
        (
            ["diagnose", str(DLRM8), "--html", "{empty}/x.html", "--html-step", "99"],
            "--html-step 99: not among the analysed steps",
        ),
        (["diagnose", str(DLRM8), "--html-step", "2"], "give --html FILE too"),
        (["diagnose", str(DLRM8), "--compare", "a", "b"], "not both"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(argv, message, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    argv = [a.replace("{empty}", str(empty)) for a in argv]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def _as_rank_of_dlrm(src, dst):
    """``src`` moved into the time window of DLRM's rank 0, without its world size (HTA's
    CPU-only rank 34 is of another job, recorded a year later: as it is, it is refused)."""
    start = gpuprobe.diagnose(DLRM_FILES[0]).steps[0].start_us
    data = load(src)
    del data["baseTimeNanoseconds"]  # its times are relative to this base
    first = min(float(e["ts"]) for e in data["traceEvents"] if e.get("ph") == "X")
    for e in data["traceEvents"]:
        if "ts" in e:
            e["ts"] = float(e["ts"]) - first + start
    del data["distributedInfo"]["world_size"]
    with gzip.open(dst, "wt") as f:
        json.dump(data, f)


def _gloo_union_in_steps(data):
    """The union (µs) of the ``gloo:*`` spans that start inside a ProfilerStep, by hand."""
    xs = [e for e in data["traceEvents"] if e.get("ph") == "X"]
    steps = [
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in xs
        if e["name"].startswith("ProfilerStep#")
    ]
    spans = sorted(
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in xs
        if e["name"].startswith("gloo:") and any(a <= float(e["ts"]) < b for a, b in steps)
    )
    total, end = 0.0, float("-inf")
    for a, b in spans:
        if a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def test_a_cpu_only_rank_beside_a_gpu_rank(tmp_path, capsys):
    with pytest.raises(gpuprobe.InputError, match="ranks of different jobs"):
        diagnose_ranks([CPU_ONLY, DLRM_FILES[0]])
    moved = tmp_path / CPU_ONLY.name
    _as_rank_of_dlrm(CPU_ONLY, moved)
    d = diagnose_ranks([moved, DLRM_FILES[0]])
    assert [(r.rank, r.rank_source) for r in d.ranks] == [
        (0, "distributedInfo"),
        (34, "distributedInfo"),
    ]
    cpu = d.rank(34)
    # a CPU rank's collectives are gloo's host spans: their union within its profiled steps
    assert cpu.gpu_busy_fraction is None and cpu.families == ()
    assert cpu.comm_us == pytest.approx(_gloo_union_in_steps(load(CPU_ONLY)), rel=1e-6)
    assert cpu.comm_us > 0
    assert d.matched_collectives == 0
    assert d.finding("straggler").status is Status.INFO
    assert d.finding("exposed-communication").status is Status.OK
    text = str(d)
    assert "n/a" in text and too_wide(text) == []


def test_collectives_are_matched_within_each_step():
    both = diagnose_ranks(SAMPLED)
    per_step = [diagnose_ranks(SAMPLED, steps=s) for s in ("551", "552")]
    assert [d.ranks[0].steps for d in per_step] == [1, 1]
    assert both.matched_collectives == sum(d.matched_collectives for d in per_step) == 10
    assert {c.step for c in per_step[1].collectives} == {552}
    # the waits add up the same whether the steps are read together or one at a time
    assert sum(r.comm_wait_us for r in both.ranks) == pytest.approx(
        sum(r.comm_wait_us for d in per_step for r in d.ranks)
    )


def test_progress_counts_bytes_over_all_files():
    seen: list[tuple[int, int]] = []
    diagnose_ranks(DLRM8, progress=lambda done, total: seen.append((done, total)))
    total = sum(f.stat().st_size for f in DLRM_FILES)
    assert {t for _, t in seen} == {total}
    assert seen[-1][0] == total
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
