"""The what-if engine (tools/diagnose/whatif): the unchanged replay reproduces real traces, a
change moves the step by what it should, and the gains it prices are what the findings say."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gpuprobe.core.findings import Status
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.engine import diagnose
from gpuprobe.tools.diagnose.kineto import read_trace
from gpuprobe.tools.diagnose.synthetic import KinetoBuilder
from gpuprobe.tools.diagnose.whatif import Change, read_graph, replay
from gpuprobe.tools.diagnose.whatif.changes import gpu_durations, remove_host
from gpuprobe.tools.diagnose.whatif.replay import replay_steps

DATA = Path(__file__).resolve().parents[2] / "data" / "diagnose"
REAL = sorted(DATA.glob("*.json.gz")) + sorted((DATA / "gpu_h200").glob("*.json.gz"))


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name[:40])
def test_the_unchanged_replay_reproduces_every_step_of_a_real_trace(path):
    ctx = TraceContext(read_trace(str(path)))
    g = read_graph(ctx)
    if g is None:
        pytest.skip("no steps")
    assert replay(g) == pytest.approx(g.window_us, abs=0.01)
    np.testing.assert_allclose(replay_steps(g), g.recorded_done, atol=0.01)
    # and an empty change is no change
    assert replay(g, Change()) == pytest.approx(g.window_us, abs=0.01)


def test_removing_host_time_before_a_sync_moves_the_step_by_that_time(tmp_path):
    # each step: 2 ms of host work, 10 kernels of 100 us, a sync: host-bound, so removing the
    # host work saves it all; the GPU's 1 ms then sets the pace
    b = KinetoBuilder()
    for n in range(4):
        with b.step(n + 1):
            b.cpu(2000.0)
            for _ in range(10):
                b.launch("void gemm_kernel", kernel_us=100.0)
            b.sync()
    path = b.write(str(tmp_path / "t.json"))
    ctx = TraceContext(read_trace(path))
    g = read_graph(ctx)
    assert g is not None and g.b_start.size == 4
    lo, hi = ctx.step_starts, ctx.step_starts + 2000.0
    done = replay_steps(g, remove_host(lo, hi))
    before = np.diff(g.recorded_done)
    after = np.diff(done)
    np.testing.assert_allclose(before - after, 2000.0, atol=1.0)


def test_priced_fixes_are_in_the_json_largest_first_and_match_the_findings():
    d = diagnose(str(DATA / "tracelens_h100_timesformer_step6.json.gz"))
    out = json.loads(json.dumps(d.to_dict()))
    fixes = d.whatif
    assert [p.gain for p in fixes] == sorted((p.gain for p in fixes), reverse=True)
    assert fixes[0].id == "host-work" and fixes[0].gain == pytest.approx(0.581, abs=0.002)
    for p in fixes:
        f = d.finding(p.id)
        if f.status is Status.WARN:
            assert f.gain == pytest.approx(p.gain, abs=1e-6)
    assert [p["id"] for p in out["whatif"]] == [p.id for p in fixes]
    # the headline comes first among the findings in --json
    assert out["findings"][0]["id"] == d.headline.id == "host-work"


def test_the_pageable_pair_on_the_h200_is_predicted_within_the_goal():
    # pageable_copies.py and pinned_copies.py on an H200 (gpu_h200/ORIGIN.md)
    before = diagnose(str(DATA / "gpu_h200" / "pageable_copies.json.gz"))
    after = diagnose(str(DATA / "gpu_h200" / "pinned_copies.json.gz"))
    f = before.finding("pageable-copies")
    assert f.status is Status.WARN and before.headline is f
    pace = [float(np.median([r.duration_us for r in x.steps])) for x in (before, after)]
    realised = 1 - pace[1] / pace[0]
    assert realised == pytest.approx(0.683, abs=0.01)
    assert abs(realised - f.gain) <= max(0.05, 0.25 * f.gain)


def _copy_loop_trace(path: str, pinned: bool) -> str:
    # each step: 20 queued 60 µs GEMMs, then tensor[i].cpu() for 60 rows (a 512-byte copy
    # each, into pageable memory unless pinned), then one explicit sync
    b = KinetoBuilder()
    for n in range(5):
        with b.step(n + 1):
            for _ in range(20):
                b.launch("void gemm_kernel", kernel_us=60.0, op="aten::mm")
            for _ in range(60):
                with b.op("aten::to"), b.op("aten::_to_copy"), b.op("aten::copy_"):
                    b.memcpy("DtoH", nbytes=512, gpu_us=2.0, pinned=pinned)
                b.cpu(8.0)
            b.sync()
    return b.write(path)


def test_copies_to_pageable_host_memory_in_a_loop_are_syncs_and_the_headline(tmp_path):
    # a copy into pageable memory holds the host until it is done, whatever the API's name:
    # the first of the 60 waits for the 1.2 ms of queued GEMMs, so the GPU drains and then
    # idles while the host walks the loop; before, the idle was booked as launch gaps
    d = diagnose(_copy_loop_trace(str(tmp_path / "t.json"), pinned=False))
    f = d.finding("sync")
    ev = {e.name: e.value for e in f.evidence}
    assert f.status is Status.WARN and d.headline is f
    assert ev["syncs_per_step_median"] == 61  # 60 copies and the explicit sync
    assert "cudaMemcpyAsync ×300" in f.title
    launch = d.finding("launch-bound")
    assert launch is None or launch.status is not Status.WARN
    # the replay without the waits: the host no longer waits for the GEMMs before its loop
    assert f.gain == pytest.approx(d.whatif[0].gain, abs=1e-6) and d.whatif[0].id == "sync"
    assert 0.25 < f.gain < 0.5
    # into pinned memory the copies are asynchronous: only the explicit sync is one
    p = diagnose(_copy_loop_trace(str(tmp_path / "p.json"), pinned=True))
    ev = {e.name: e.value for e in p.finding("sync").evidence}
    assert ev["syncs_per_step_median"] == 1


def test_a_scalar_read_priced_out_whole_with_its_host_time(tmp_path):
    # each step: 10 kernels of 20 µs queued, 300 µs of host work, then .item(); the GPU is done
    # before the read so its wait is µs, but the read's op itself (40 µs here) is host time on
    # the step's path: reading every N steps takes it out whole
    b = KinetoBuilder()
    for n in range(5):
        with b.step(n + 1):
            for _ in range(10):
                b.launch("void add_kernel", kernel_us=20.0)
            b.cpu(300.0)
            with b.op("aten::item", self_us=20.0), b.op("aten::_local_scalar_dense", self_us=10):
                b.memcpy("DtoH", nbytes=4, gpu_us=1.5, pinned=True)
                b.sync()
    d = diagnose(b.write(str(tmp_path / "t.json")))
    ctx = TraceContext(read_trace(str(tmp_path / "t.json")))
    items = [i for i in range(ctx.op_name.size) if ctx.names[ctx.op_name[i]] == "aten::item"]
    item_us = float(np.median(ctx.op_dur[items]))
    pace = float(np.median([r.duration_us for r in d.steps]))
    p = next(x for x in d.whatif if x.id == "sync")
    assert p.gain == pytest.approx(item_us / pace, rel=0.15)


H200 = DATA / "gpu_h200"


def _pair(before: str, after: str):
    from gpuprobe.tools.diagnose.compare import compare_diagnoses

    return compare_diagnoses(
        diagnose(str(H200 / f"{before}.json.gz")), diagnose(str(H200 / f"{after}.json.gz"))
    )


def test_compare_says_what_each_fix_predicted_and_what_the_after_trace_realised():
    from gpuprobe.tools.diagnose.compare import PAYOFF_POINTS, PAYOFF_SHARE

    c = _pair("pageable_copies", "pinned_copies")
    pace = [float(np.median([r.duration_us for r in d.steps])) for d in (c.before, c.after)]
    assert c.realised == pytest.approx(1 - pace[1] / pace[0], abs=1e-6)
    by = {p.id: p for p in c.payoffs}
    p = by["pageable-copies"]
    assert p.predicted == pytest.approx(c.before.finding("pageable-copies").gain, abs=1e-6)
    assert p.fixed and p.left == 0.0 and p.together == ("pageable-copies",)
    assert abs(p.realised - p.predicted) <= max(PAYOFF_POINTS, PAYOFF_SHARE * p.predicted)
    assert p.verdict == "paid as predicted"
    # the FP32 matmuls: information in BEFORE (the host sets the pace: the replay with them on
    # the Tensor Cores saves under 1 %), so not a fix to follow
    assert c.before.finding("no-tensor-cores").status is Status.INFO
    assert "no-tensor-cores" not in by
    # largest prediction first; gpu-idle (the symptom) is not a fix
    assert [x.predicted for x in c.payoffs] == sorted(x.predicted for x in c.payoffs)[::-1]
    assert "gpu-idle" not in by
    out = json.loads(json.dumps(c.to_dict()))
    assert out["realised"] == c.realised
    assert out["payoffs"][0]["id"] == "pageable-copies"
    assert out["payoffs"][0]["verdict"] == "paid as predicted"


def test_the_tf32_pair_on_the_h200_is_predicted_within_the_goal():
    # the 2.68 ms FP32 GEMM at the H200's TF32 rate (7.4x peak, 6.4x for a kernel that long)
    c = _pair("fp32_matmul", "tf32_matmul")
    p = next(x for x in c.payoffs if x.id == "no-tensor-cores")
    assert p.fixed and p.verdict == "paid as predicted"
    assert abs(p.realised - p.predicted) <= 0.05


def test_a_fix_that_paid_more_than_it_promised_says_so_in_the_text(tmp_path, monkeypatch):
    # 100 µs FP32 GEMMs on an H200, then the same GEMMs at 5 µs: more than the ~2x the replay
    # gives a GEMM that short (1 + (7.4 - 1) * 100 / (100 + 500))
    from gpuprobe.tools.diagnose.compare import compare_diagnoses

    def gemms(name: str, kernel: str, us: float) -> str:
        b = KinetoBuilder(compute_major=9)
        for n in range(5):
            with b.step(n):
                for _ in range(8):
                    b.launch(kernel, kernel_us=us, op="aten::mm")
                    b.launch("void elementwise_kernel", kernel_us=30.0, op="aten::add")
        return b.write(name)  # in tmp_path: the header names the files whole

    monkeypatch.chdir(tmp_path)
    fp32 = "volta_sgemm_128x64_nn"
    tf32 = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x256x32"
    c = compare_diagnoses(
        diagnose(gemms("fp32.json", fp32, 100.0)), diagnose(gemms("tf32.json", tf32, 5.0))
    )
    p = next(x for x in c.payoffs if x.id == "no-tensor-cores")
    assert p.fixed and p.realised > p.predicted + 0.25 * p.predicted and p.verdict == "paid more"
    text = str(c)
    assert all(len(line) <= 80 for line in text.splitlines())
    row = next(line for line in text.splitlines() if line.startswith("no-tensor-cores "))
    assert f"{100 * p.predicted:.1f} %" in row and f"+{100 * p.realised:.1f} %" in row
    assert "paid more" in row
    assert "<th>realised</th>" in c._repr_html_()


def test_the_python_loop_pair_on_the_h200_is_predicted_within_the_goal():
    # python_loop_mask.py (80 masks in a loop) and vectorized_mask.py: the loop's host time
    # out of the step and its kernels one kernel per step
    c = _pair("python_loop_mask", "vectorized_mask")
    assert c.before.headline.id == "python-loop"
    p = next(x for x in c.payoffs if x.id == "python-loop")
    assert p.fixed and p.verdict == "paid as predicted"
    assert abs(p.realised - p.predicted) <= 0.05


def test_fixes_made_together_are_judged_together(tmp_path):
    # BEFORE: a 3 ms single-process DataLoader wait, 1 ms of GPU work, a sync that waits for
    # it, then 1.5 ms of CPU work; AFTER: no DataLoader wait and no sync (the CPU work stays,
    # now beside the GPU's). Neither fix alone explains the step's gain; their changes replayed
    # at once do
    from gpuprobe.tools.diagnose.compare import fix_payoffs
    from gpuprobe.tools.diagnose.engine import diagnose_with_context

    def trace(path: str, fixed: bool) -> str:
        b = KinetoBuilder()
        for n in range(5):
            with b.step(n + 1):
                if not fixed:
                    b.dataloader(3000.0)
                for _ in range(10):
                    b.launch("void gemm_kernel", kernel_us=100.0, launch_us=5.0)
                if not fixed:
                    b.sync()
                with b.op("aten::cumsum", self_us=1500.0):
                    pass
        return b.write(path)

    before, ctx = diagnose_with_context(trace(str(tmp_path / "b.json"), fixed=False))
    after = diagnose(trace(str(tmp_path / "a.json"), fixed=True))
    realised, payoffs = fix_payoffs(before, after, ctx)
    made = {p.id: p for p in payoffs if p.fixed}
    assert set(made) == {"input-bound", "sync"}
    # the FP32 GEMMs are still there in AFTER, off its path (the 1.5 ms of CPU work now sets
    # the pace): not fixed, though worth nothing there
    q = next(p for p in payoffs if p.id == "no-tensor-cores")
    assert not q.fixed and q.verdict == "not fixed" and q.left == 0.0
    assert after.finding("no-tensor-cores").status is Status.INFO
    joint = made["sync"].predicted_together
    assert joint == made["input-bound"].predicted_together
    assert max(p.predicted for p in made.values()) < joint
    assert made["sync"].together == made["input-bound"].together
    assert abs(realised - joint) <= 0.05 and made["sync"].verdict == "paid as predicted"
    # without the trace's context: the sum of the two gains
    _, alone = fix_payoffs(before, after)
    total = sum(p.predicted for p in made.values())
    assert next(p for p in alone if p.id == "sync").predicted_together == pytest.approx(
        total, abs=1e-5
    )


def _loop_trace(path: str, frame: str, kernel_us: float, n: int = 150) -> str:
    # each step: n ops from one line of code, each launching one kernel, 12 µs of Python
    # between them (the loop's body), then a sync
    b = KinetoBuilder()
    for s in range(4):
        with b.step(s + 1), b.python("train.py(30): main"), b.python(frame):
            for _ in range(n):
                b.launch("void gemm_kernel", kernel_us=kernel_us, op="aten::mm")
                b.cpu(12.0)
            b.sync()
    return b.write(path)


def test_a_loop_in_code_a_compiler_generated_is_not_a_python_loop(tmp_path):
    # Inductor's output module calls aten::mm once per matmul of the compiled graph: 150 per
    # step from its call() are the graph's nodes, not a loop to vectorise
    frame = "/tmp/torchinductor_user/ab/cabx3kq2v7.py(412): call"
    d = diagnose(_loop_trace(str(tmp_path / "ind.json"), frame, kernel_us=3.0))
    assert d.finding("python-loop").status is Status.OK
    # the same ops from the user's own loop are one
    d = diagnose(_loop_trace(str(tmp_path / "own.json"), "model.py(12): masks", kernel_us=3.0))
    f = d.finding("python-loop")
    assert f.status is Status.WARN and d.headline is f
    # its price: the loop's host time (ops and the Python between them) out of the step, its
    # 150 kernels of 3 µs one of 150 x (3 - 2.5) µs
    pace = float(np.median([r.duration_us for r in d.steps]))
    ctx = TraceContext(read_trace(str(tmp_path / "own.json")))
    mm = [i for i in range(ctx.op_name.size) if ctx.names[ctx.op_name[i]] == "aten::mm"]
    a = np.sort(ctx.op_ts[mm])[:150]
    loop = float(a[-1] + ctx.op_dur[mm].max() - a[0])  # the first step's loop, first op to last
    assert f.gain == pytest.approx(loop / pace, abs=0.05)


def test_a_loop_of_large_ops_costs_nothing_and_does_not_warn(tmp_path):
    # 150 matmuls of 500 µs each from one line: the GPU sets the pace (75 ms a step against
    # the loop's ~3 ms of host time), so one batched op would save next to nothing
    d = diagnose(_loop_trace(str(tmp_path / "big.json"), "bench.py(8): run", kernel_us=500.0))
    f = d.finding("python-loop")
    assert f.status is Status.INFO and f.gain is not None and f.gain < 0.01
    assert d.headline is None or d.headline.id != "python-loop"


def test_only_the_launching_thread_explains_the_gpu_idle(tmp_path):
    # each step: a 16.9 MB pageable input copy, 10 kernels, then 2 ms of host time the
    # profiler does not record on the launching thread, while the DataLoader's pin-memory
    # thread sits in a 3 ms lock wait (a python_function of another thread). That wait holds
    # up nothing: the 2 ms hole is untraced host time of the launching thread, not "Python
    # between ops" because some thread had a frame open
    b = KinetoBuilder()
    for n in range(5):
        with b.step(n + 1):
            b.memcpy("HtoD", nbytes=16_900_000, gpu_us=1500.0)
            for _ in range(10):
                b.launch("void add_kernel", kernel_us=100.0, op="aten::add")
            t0 = b.now
            b.cpu(2000.0)
            t1 = b.now
            b.sync()
            main, b.tid = b.tid, 777
            b._x("python_function", "threading.py(324): wait", t0 - 500, (t1 - t0) + 1000)
            b.tid = main
    d = diagnose(b.write(str(tmp_path / "pin.json")))
    assert d.headline.id == "pageable-copies"
    u = d.finding("untraced-host")
    assert u.status is Status.WARN
    ev = {e.name: e.value for e in u.evidence}
    assert ev["gaps"] == 5
    host = d.finding("host-work")
    assert host is None or host.status is not Status.WARN
    # the untraced stretches' replay: the 2 ms hole out of the step, less the 1 ms of kernels
    # that ran under it (the sync after it still waits for them)
    pace = float(np.median([r.duration_us for r in d.steps]))
    assert u.gain == pytest.approx((2000.0 - 1000.0) / pace, rel=0.1)


def _two_streams(tmp_path: Path, nccl_us: float = 2000.0) -> str:
    # each step: a kernel, an all-reduce on NCCL's stream that waits for it, a kernel that
    # waits for the all-reduce, a sync: the GPU chain (500 + 2000 + 500 us) sets the pace
    b = KinetoBuilder()
    for n in range(5):
        with b.step(n + 1):
            b.cpu(20.0)
            b.launch("void gemm_kernel", kernel_us=500.0)
            b.wait_stream(20, on=7)
            b.launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", kernel_us=nccl_us, stream=20)
            b.wait_stream(7, on=20)
            b.launch("void gemm_kernel", kernel_us=500.0)
            b.sync()
    return b.write(str(tmp_path / "two_streams.json"))


def test_a_wait_on_another_stream_is_an_edge_of_the_replay(tmp_path):
    ctx = TraceContext(read_trace(_two_streams(tmp_path)))
    g = read_graph(ctx)
    assert g is not None
    # per step: the all-reduce waits for the first kernel, the second kernel for the all-reduce
    assert int((g.g_xdep >= 0).sum()) == 10
    np.testing.assert_allclose(replay_steps(g), g.recorded_done, atol=0.01)
    nccl = np.char.startswith(np.array(ctx.names)[ctx.gpu_name], "nccl")
    half = gpu_durations(nccl, ctx.gpu_dur[nccl] / 2)
    saved = np.diff(g.recorded_done) - np.diff(replay_steps(g, half))
    np.testing.assert_allclose(saved, 1000.0, atol=1.0)  # the second kernel starts 1 ms sooner
    # and the edge's lag is counted from the all-reduce's end, not from the launch
    assert float(g.g_lag[g.g_xdep >= 0].max()) == pytest.approx(1.5, abs=0.01)


def test_exposed_communication_on_one_rank_is_priced_and_the_headline(tmp_path):
    d = diagnose(_two_streams(tmp_path))
    f = d.finding("exposed-communication")
    assert f is not None and f.status is Status.WARN and d.headline is f
    ev = {e.name: e.value for e in f.evidence}
    assert ev["exposed_per_step"] == pytest.approx(2000.0, abs=1.0)
    assert ev["comm_overlapped"] == 0.0
    # hiding the all-reduce entirely saves 2 ms of each ~3 ms step
    assert f.gain == pytest.approx(2000.0 / 3000.0, abs=0.03)


def test_one_ranks_exposed_communication_matches_the_folders_figure_for_it():
    from gpuprobe.tools.diagnose.ranks import diagnose_ranks

    folder = diagnose_ranks(str(DATA / "dlrm8"))
    for row in folder.ranks:
        f = diagnose(row.path).finding("exposed-communication")
        assert f is not None
        ev = {e.name: e.value for e in f.evidence}
        assert ev["exposed_per_step"] == pytest.approx(row.per_step(row.exposed_comm_us), abs=1.0)
    # rank 1's SendRecv calls run 0.13-7.6 ms: the finding says it may be a wait for a peer
    f = diagnose(str(next((DATA / "dlrm8").glob("worker1_*")))).finding("exposed-communication")
    assert f is not None and f.status is Status.WARN
    assert "132-7,635 µs" in f.details[0] and "slower rank" in f.title


def test_a_wait_for_work_the_trace_does_not_show_keeps_its_price(tmp_path):
    # each step: 20 kernels, then a small copy that something outside the trace holds back 40
    # ms (the stream busy with work not profiled), and the sync that waits for it: no replay of
    # the trace can move that wait, and the sync finding prices the stall as it is
    b = KinetoBuilder()
    for n in range(4):
        with b.step(n + 1):
            for _ in range(20):
                b.launch("void elementwise_kernel", kernel_us=50.0)
            b._stream_free[(0, 7)] = b.free_at(0) + 40_000.0  # work the trace does not show
            b.memcpy("DtoH", nbytes=8192, gpu_us=1.0, pinned=True)
            b.sync()
    d = diagnose(b.write(str(tmp_path / "blind.json")))
    f = d.finding("sync")
    assert f is not None and f.status is Status.WARN and d.headline is f
    assert "the host waited for work the trace does not show" in f.title
    assert "another process on the same GPU" in f.fix
    ev = {e.name: e.value for e in f.evidence}
    assert ev["waits_outside_trace"] is True
    step = float(np.median([s.duration_us for s in d.steps]))
    assert f.gain == pytest.approx(40_000.0 / step, abs=0.02)


def test_on_a_cpu_trace_a_fix_saves_the_host_stretches_it_takes_out():
    # benchmarks/record_cpu_pairs.py on this machine's CPU: a model run row by row in a Python
    # loop, then on the batch; the step is host time alone, so the loop's body (its ops and
    # the Python between them) is what batching saves
    from gpuprobe.tools.diagnose.engine import compare

    pairs = DATA / "cpu_pairs"
    c = compare(str(pairs / "rows_loop.json.gz"), str(pairs / "rows_batched.json.gz"))
    f = c.before.finding("python-loop")
    assert f is not None and f.status is Status.WARN and c.before.headline is f
    ev = {e.name: e.value for e in f.evidence}
    step = float(np.median([s.duration_us for s in c.before.steps]))
    assert f.gain > ev["loop_ops_time_per_step"] / step  # the Python between the ops counts
    p = next(x for x in c.payoffs if x.id == "python-loop")
    assert p.fixed and p.verdict == "paid as predicted"
    assert abs(p.realised - p.predicted) <= 0.05


def test_the_gloo_straggler_pair_is_predicted_within_the_goal():
    # benchmarks/record_cpu_pairs.py: two gloo ranks on this CPU, rank 1 with 12 ms of its own
    # extra work a step, then none; the straggler finding's gain against the job's median step
    from gpuprobe.tools.diagnose.ranks import diagnose_ranks

    slow = diagnose_ranks(str(DATA / "cpu_pairs" / "straggler_slow"))
    even = diagnose_ranks(str(DATA / "cpu_pairs" / "straggler_even"))
    f = next(x for x in slow.findings if x.id == "straggler")
    assert f.status is Status.WARN and slow.straggler == 1
    assert "its own work outside the collectives is" in f.title
    pace = [float(np.median([r.step_median_us for r in d.ranks])) for d in (slow, even)]
    realised = 1.0 - pace[1] / pace[0]
    assert abs(realised - f.gain) <= max(0.05, 0.25 * f.gain)
