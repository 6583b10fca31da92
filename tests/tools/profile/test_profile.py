"""``gpuprobe profile -- CMD``: real scripts (tests/tools/profile/scripts, none of which knows
gpuprobe) run unchanged under the CPU build of torch, with the real torch.profiler; each test
checks the steps profiled (the warm-up skipped), the trace's contents and the verdict."""

from __future__ import annotations

import gzip
import json
import os
import re
import socket
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

import gpuprobe
from _support import too_wide
from gpuprobe.core.errors import GpuprobeError, InputError
from gpuprobe.core.findings import Status

pytest.importorskip("torch")

SCRIPTS = Path(__file__).parent / "scripts"
PY = sys.executable


def _script(name: str, *args: str) -> list[str]:
    return [PY, str(SCRIPTS / name), *args]


def _events(trace: str) -> list[dict]:
    with gzip.open(trace, "rt") as f:
        return json.load(f)["traceEvents"]


def _optimizer_steps_nested(trace: str) -> int:
    """How many ``Optimizer.step#`` ranges lie wholly inside one ProfilerStep (asserting none
    crosses a step's end)."""
    xs = [e for e in _events(trace) if e.get("ph") == "X"]
    steps = [
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in xs
        if e["name"].startswith("ProfilerStep#")
    ]
    inside = 0
    for e in xs:
        if e["name"].startswith("Optimizer.step#"):
            a, b = float(e["ts"]), float(e["ts"]) + float(e["dur"])
            _s0, s1 = next(st for st in steps if st[0] <= a < st[1])
            assert b <= s1, f"Optimizer.step ends {b - s1:.1f} µs after its step"
            inside += 1
    return inside


def _ev(finding, name: str):
    return next(e.value for e in finding.evidence if e.name == name)


def _steps_in(trace: str) -> list[int]:
    return sorted(
        int(e["name"].split("#")[1])
        for e in _events(trace)
        if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")
    )


@pytest.fixture(autouse=True)
def _steps(monkeypatch):
    monkeypatch.setenv("STEPS", "20")
    monkeypatch.chdir(SCRIPTS)  # the scripts import their _common module from beside them


def test_a_starved_loop_is_profiled_after_its_warm_up_and_named_input_bound(tmp_path, capfd):
    report = gpuprobe.profile_command(_script("starved.py"), tmp_path / "p", hz=5)
    assert report.exit_code == 0 and "trained 20 steps" in capfd.readouterr().out
    (proc,) = report.processes
    assert proc.mode == "optimizer" and proc.steps == 20 and proc.exited
    (window,) = proc.windows
    # defaults: skip 10 steps, warm up 2, record 5 (0-based step numbers, as the process counted)
    assert (window.first_step, window.recorded_from, window.last_step) == (10, 12, 16)
    assert window.state == "done" and window.recorded_steps == 5 and not window.cuda
    (trace,) = report.traces
    assert Path(trace).parent == tmp_path / "p" / "traces"
    assert _steps_in(trace) == [12, 13, 14, 15, 16]
    names = {e.get("name") for e in _events(trace)}
    assert "Optimizer.step#SGD.step" in names and "aten::linear" in names
    # each step ends after the optimizer's step() returned: its range lies inside one step
    assert _optimizer_steps_nested(trace) == 5
    d = report.diagnosis
    assert d is not None and d.headline is not None and d.headline.id == "input-bound"
    assert d.summary.steps == (12, 13, 14, 15, 16)
    share = _ev(d.finding("input-bound"), "dataloader_share_median")
    assert share is not None and share >= 50  # 32 samples x 3 ms of loading vs a small MLP
    files = {Path(f).name for f in report.files}
    assert {"diagnosis.html", "timeline.jsonl", "report.html"} <= files
    assert report.run is not None and report.run.exit_code == 0


def test_dataloader_workers_are_never_profiled(tmp_path):
    report = gpuprobe.profile_command(
        _script("starved.py", "2"), tmp_path / "p", skip=3, warmup=1, active=3
    )
    assert report.exit_code == 0
    # the two worker processes imported torch too, but left no status and no trace
    assert [p.steps for p in report.processes] == [20]
    assert len(report.traces) == 1 and _steps_in(report.traces[0]) == [4, 5, 6]


def test_an_item_every_step_is_counted_per_step(tmp_path):
    report = gpuprobe.profile_command(
        _script("item_loop.py"), tmp_path / "p", skip=3, warmup=1, active=4, with_stack=True
    )
    assert report.exit_code == 0
    assert _steps_in(report.traces[0]) == [4, 5, 6, 7]
    items = [e for e in _events(report.traces[0]) if e.get("name") == "aten::item"]
    assert len(items) == 2 * 4  # loss.item() and accuracy.item(), per recorded step
    sync = report.diagnosis.finding("sync")
    assert sync.status is Status.INFO and _ev(sync, "scalar_reads_per_step_median") == 2
    # each step diagnosed has both reads (a step a loaded machine held up may be set apart)
    items = [b.items for b in report.diagnosis.steps]
    assert len(items) >= 3 and set(items) == {2}
    # --with-stack: the trace has the Python frames, and the finding names the script's line
    # (torch's Python tracer gives a C call the line of its frame's last Python call)
    assert report.diagnosis.summary.with_stack
    assert re.search(r"\.item\(\) from item_loop\.py\(\d+\): <module>: 8 calls", sync.details[0])


def test_inference_without_an_optimizer_steps_by_dataloader_batches(tmp_path):
    report = gpuprobe.profile_command(
        _script("inference.py"), tmp_path / "p", skip=3, warmup=1, active=3
    )
    (proc,) = report.processes
    # 20 batches: each next() after the first ends a step, and the StopIteration call the 20th
    assert proc.mode == "dataloader" and proc.steps == 20
    assert _steps_in(report.traces[0]) == [4, 5, 6]
    names = {e.get("name") for e in _events(report.traces[0])}
    assert "aten::linear" in names and not any(n.startswith("Optimizer") for n in names if n)
    assert report.diagnosis.finding("host-work") is not None


def test_a_script_with_its_own_profiler_runs_as_if_gpuprobe_were_not_there(tmp_path, capfd):
    own = tmp_path / "own.json"
    report = gpuprobe.profile_command(
        _script("own_profiler.py", str(own)), tmp_path / "p", skip=3, warmup=1, active=3
    )
    assert report.exit_code == 0 and "own trace written" in capfd.readouterr().out
    (proc,) = report.processes
    assert proc.aside == "the script runs its own torch.profiler" and proc.windows == ()
    assert report.traces == () and report.diagnosis is None
    assert any("stood aside" in n for n in report.notes)
    # the script's own profiler recorded its own schedule (wait 1, warm up 1, active 2)
    steps = [
        e["name"]
        for e in json.loads(own.read_text())["traceEvents"]
        if e.get("name", "").startswith("ProfilerStep#")
    ]
    assert steps == ["ProfilerStep#2", "ProfilerStep#3"]


def test_a_crash_mid_window_keeps_the_steps_recorded_and_the_exit_code(tmp_path, monkeypatch):
    monkeypatch.setenv("CRASH_AT", "7")
    report = gpuprobe.profile_command(
        _script("crash.py"), tmp_path / "p", skip=3, warmup=1, active=10
    )
    assert report.exit_code == 1
    (window,) = report.processes[0].windows
    assert window.state == "cut short: the process exited"
    # steps 4, 5, 6 whole, and step 7 up to the bad batch
    assert (window.recorded_from, window.last_step) == (4, 7)
    assert _steps_in(report.traces[0]) == [4, 5, 6, 7]
    assert report.diagnosis is not None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_two_torchrun_ranks_write_a_trace_each_and_are_diagnosed_as_ranks(tmp_path):
    torchrun = [PY, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    cmd = [*torchrun, "--master-port", str(_free_port()), str(SCRIPTS / "ddp.py")]
    report = gpuprobe.profile_command(cmd, tmp_path / "p", skip=5, warmup=1, active=3)
    assert report.exit_code == 0
    ranks = [p for p in report.processes if p.rank is not None]
    assert [(p.rank, p.steps) for p in ranks] == [(0, 20), (1, 20)]
    launcher = [p for p in report.processes if p.rank is None]
    assert [p.steps for p in launcher] == [0]  # torchrun itself imports torch, makes no step
    names = sorted(Path(t).name for t in report.traces)
    assert [n.split("-")[0] for n in names] == ["rank0", "rank1"]
    for t in report.traces:
        with gzip.open(t, "rt") as f:
            info = json.load(f)["distributedInfo"]
        assert info["backend"] == "gloo" and info["world_size"] == 2
        assert _steps_in(t) == [6, 7, 8]
    d = report.ranks
    assert d is not None and [r.rank for r in d.ranks] == [0, 1]
    # rank 1 sleeps 10 ms per step before its forward: rank 0 waits for it in gloo:all_reduce
    assert d.straggler == 1 and d.matched_collectives >= 3
    f = d.finding("straggler")
    assert f.status is Status.WARN and "outside the collectives" in f.title
    assert _ev(f, "gpu_idle_vs_median") > 5000  # µs/step: most of the 10 ms sleep


def test_a_non_python_command_gives_the_timeline_only(tmp_path):
    report = gpuprobe.profile_command(["sh", "-c", "sleep 0.3; exit 3"], tmp_path / "p")
    assert report.exit_code == 3 and report.processes == () and report.traces == ()
    assert report.run is not None and report.run.exit_code == 3
    assert any("no Python process" in n for n in report.notes)
    assert (tmp_path / "p" / "timeline.jsonl").is_file()


def test_python_that_never_imports_torch_is_said_so(tmp_path):
    cmd = [PY, "-c", "import sys, time; time.sleep(1.5); print('torch' in sys.modules)"]
    report = gpuprobe.profile_command(cmd, tmp_path / "p", hz=10)
    assert report.exit_code == 0 and report.processes == ()
    assert any("none imported torch" in n for n in report.notes), report.notes


def test_too_few_steps_says_how_to_lower_skip(tmp_path, monkeypatch):
    monkeypatch.setenv("STEPS", "6")
    report = gpuprobe.profile_command(_script("starved.py"), tmp_path / "p")
    assert report.exit_code == 0 and report.traces == ()
    (note,) = report.notes
    assert "ran 6 optimizer steps" in note and "records from step 12" in note
    assert "--skip 2" in note


@pytest.mark.serial  # the window is timed from the profiler's start: slow under a loaded run
def test_a_time_window_profiles_a_loop_without_steps(tmp_path, monkeypatch):
    # the 1 s window is timed from the profiler's start, which took 2.5 s once on a loaded
    # machine: the script outlasts that (with 3 s it ended first, the window cut short)
    monkeypatch.setenv("RUN_S", "6")
    report = gpuprobe.profile_command(
        _script("plain_loop.py"), tmp_path / "p", seconds=1.0, delay=0.5
    )
    (proc,) = report.processes
    (window,) = proc.windows
    assert proc.mode is None and window.seconds == 1.0 and window.state == "done"
    ops = [e for e in _events(report.traces[0]) if e.get("name") == "aten::linear"]
    assert len(ops) >= 2 and not _steps_in(report.traces[0])
    assert report.diagnosis is not None


def test_the_hook_never_imports_torch_before_the_script(tmp_path):
    code = "import sys; print('before', 'torch' in sys.modules); import torch; print('after')"
    out = tmp_path / "p"
    from gpuprobe.tools.profile.hook import HookSettings, hook_env

    env = hook_env(out, HookSettings())
    done = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["before", "False", "after"]
    (status,) = (out / ".gpuprobe-profile").glob("proc-*.json")
    doc = json.loads(status.read_text())
    assert doc["steps"] == 0 and doc["exited"] and doc["torch"].startswith("2.")


def test_an_existing_sitecustomize_still_runs(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text(
        "import os\nopen(os.environ['MARK'], 'w').write('ran')\n"
    )
    from gpuprobe.tools.profile.hook import HookSettings, hook_env

    env = hook_env(tmp_path / "p", HookSettings(), {**os.environ, "PYTHONPATH": str(theirs)})
    env["MARK"] = str(tmp_path / "mark")
    assert env["PYTHONPATH"].split(os.pathsep)[1] == str(theirs)
    subprocess.run([PY, "-c", "import torch"], env=env, check=True)
    assert (tmp_path / "mark").read_text() == "ran"
    assert list((tmp_path / "p" / ".gpuprobe-profile").glob("proc-*.json"))


def test_the_command_line_json_is_alone_on_stdout(tmp_path):
    cmd = [PY, "-m", "gpuprobe", "profile", "--json", "--skip", "3", "--warmup", "1"]
    cmd += ["--active", "3", "--out", str(tmp_path / "p"), "--", *_script("starved.py")]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "STEPS": "8"})
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)  # one document, nothing else
    assert doc["exit_code"] == 0 and doc["diagnosis"]["headline"] == "input-bound"
    assert doc["processes"][0]["windows"][0]["recorded_from"] == 4
    assert "trained 8 steps" in done.stderr  # the script's stdout went to stderr


def test_bad_input_is_one_line_before_the_command_starts(tmp_path):
    marker = tmp_path / "started"
    run = [PY, "-c", f"open({str(marker)!r}, 'w')"]
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(InputError, match="is a file, not a directory"):
        gpuprobe.profile_command(run, blocker)
    assert not marker.exists()
    with pytest.raises(GpuprobeError, match="not found") as err:
        gpuprobe.profile_command(["no-such-command-here"], tmp_path / "p")
    assert err.value.exit_code == 127 and not (tmp_path / "p").exists()
    cli = [PY, "-m", "gpuprobe", "profile", "--out", str(tmp_path / "q"), "--", "no-such-x"]
    done = subprocess.run(cli, capture_output=True, text=True)
    assert done.returncode == 127 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "no-such-x: command not found" in done.stderr
    with pytest.raises(ValueError, match="--active >= 1"):
        gpuprobe.profile_command(run, tmp_path / "r", active=0)


def test_the_report_reads_in_80_columns_and_round_trips(tmp_path):
    report = gpuprobe.profile_command(
        _script("starved.py"), tmp_path / "p", skip=3, warmup=1, active=3
    )
    text = str(report)
    assert too_wide(text) == []
    assert re.search(r"pid \d+ \(starved\.py\): 20 optimizer steps; recorded steps 4\.\.6", text)
    assert "input-bound" in text and "see it again: gpuprobe diagnose" in text
    r = repr(report)
    assert "\n" not in r and len(r) <= 200 and "headline input-bound" in r
    back = type(report).from_dict(json.loads(json.dumps(report.to_dict())))
    assert back.processes == report.processes and back.diagnosis == report.diagnosis
    assert "<pre>" in report._repr_html_()


def _wait_for_status(out: Path, timeout: float = 60.0, processes: int = 1) -> None:
    """Until ``processes`` of the job have said they step (their status names a mode)."""
    import time

    end = time.monotonic() + timeout
    while True:
        docs = []
        for f in (out / ".gpuprobe-profile").glob("proc-*.json"):
            try:
                docs.append(json.loads(f.read_text()))
            except (OSError, ValueError):
                continue
        if sum(1 for d in docs if d.get("mode")) >= processes:
            return
        assert time.monotonic() < end, "the job never made a step"
        time.sleep(0.1)


@pytest.mark.slow
def test_a_job_under_run_is_profiled_on_demand_and_a_second_request_waits(tmp_path):
    import threading
    import time

    out, stop = tmp_path / "job", tmp_path / "stop"
    env = {**os.environ, "STOP_FILE": str(stop)}
    cmd = [PY, "-m", "gpuprobe", "run", "--out", str(out), "--", *_script("long_job.py")]
    job = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for_status(out)
        with pytest.raises(InputError, match="not a job's --out folder"):
            gpuprobe.profile_now(tmp_path)
        first: list[object] = []
        asked = threading.Thread(target=lambda: first.append(gpuprobe.profile_now(out, steps=3)))
        asked.start()
        end = time.monotonic() + 60
        while not (out / ".gpuprobe-profile" / "request.json").exists():
            assert asked.is_alive(), "the first request failed"
            assert time.monotonic() < end
            time.sleep(0.01)
        with pytest.raises(GpuprobeError, match="being taken already") as busy:
            gpuprobe.profile_now(job.pid, steps=3)  # gpuprobe's own pid finds the job too
        assert busy.value.exit_code == 2
        asked.join(timeout=120)
        (report,) = first
        assert report.exit_code is None and report.request is not None
        (trace,) = report.traces
        assert Path(trace).parent == out / f"now-{report.request}"
        steps = _steps_in(trace)
        assert len(steps) == 3 and steps == list(range(steps[0], steps[0] + 3))
        (proc,) = report.processes
        assert proc.requests[report.request] == "done" and proc.mode == "optimizer"
        assert report.diagnosis is not None and report.diagnosis.summary.steps == tuple(steps)
        # the job kept running: a second request now is taken
        again = gpuprobe.profile_now(out, steps=2)
        assert len(again.traces) == 1 and _steps_in(again.traces[0])[0] > steps[-1]
    finally:
        stop.write_text("")
        _out, err = job.communicate(timeout=120)
    assert job.returncode == 0, err


@pytest.mark.gpu
def test_a_gpu_loop_is_profiled_with_its_cuda_activity(tmp_path):
    report = gpuprobe.profile_command(
        _script("cuda_loop.py"), tmp_path / "p", skip=5, warmup=1, active=5
    )
    assert report.exit_code == 0
    (window,) = report.processes[0].windows
    assert window.cuda and window.recorded_from == 6 and window.last_step == 10
    kernels = [e for e in _events(report.traces[0]) if e.get("cat") == "kernel"]
    assert kernels, "no CUDA kernel in the trace"
    d = report.diagnosis
    assert d is not None and d.summary.has_gpu and d.summary.steps == (6, 7, 8, 9, 10)
    # the host-made batches of 256 samples x 0.5 ms keep the GPU waiting for the DataLoader
    assert d.headline is not None and d.headline.id == "input-bound"


def test_a_find_spec_check_before_the_import_still_hooks_torch(tmp_path):
    report = gpuprobe.profile_command(
        _script("find_spec_first.py"), tmp_path / "p", skip=3, warmup=1, active=3
    )
    assert report.exit_code == 0
    (proc,) = report.processes
    assert proc.steps == 20 and _steps_in(report.traces[0]) == [4, 5, 6]


def test_a_legacy_profiler_during_the_window_makes_gpuprobe_stand_aside(tmp_path, capfd):
    env_at = {"LEGACY_AT": "5"}  # gpuprobe's window: steps 3 (warm-up) .. 8
    os.environ.update(env_at)
    try:
        report = gpuprobe.profile_command(
            _script("legacy_profiler.py"), tmp_path / "p", skip=3, warmup=1, active=5
        )
    finally:
        del os.environ["LEGACY_AT"]
    out = capfd.readouterr().out
    assert report.exit_code == 0 and "legacy profiler saw True" in out and "done" in out
    (proc,) = report.processes
    assert proc.aside == "the script runs its own torch.profiler" and proc.steps == 20
    (window,) = proc.windows
    assert window.state == "cut short: the script started its own torch.profiler"
    # what it recorded before the script's profiler began: step 4, and step 5 up to it
    assert window.recorded_from == 4 and _steps_in(report.traces[0]) == [4, 5]


def test_sigterm_mid_window_writes_the_steps_so_far_and_keeps_the_signal(tmp_path, monkeypatch):
    monkeypatch.setenv("TERM_AT", "8")
    report = gpuprobe.profile_command(
        _script("sigterm.py"), tmp_path / "p", skip=3, warmup=1, active=20
    )
    assert report.exit_code == 128 + 15  # killed by SIGTERM, as before
    (window,) = report.processes[0].windows
    assert window.state == "cut short: SIGTERM"
    assert _steps_in(report.traces[0]) == [4, 5, 6, 7, 8]
    assert report.diagnosis is not None


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_spawned_dataloader_workers_leave_no_status(tmp_path, context):
    report = gpuprobe.profile_command(
        _script("spawn_workers.py", context), tmp_path / "p", skip=3, warmup=1, active=3
    )
    assert report.exit_code == 0
    assert [p.steps for p in report.processes] == [20]  # the statuses read: no worker's
    assert not (tmp_path / "p" / ".gpuprobe-profile").exists()  # removed once read


@pytest.mark.slow
def test_on_demand_skips_a_launcher_that_makes_no_step(tmp_path):
    import time

    out, stop = tmp_path / "job", tmp_path / "stop"
    cmd = [PY, "-m", "gpuprobe", "profile", "--later", "--out", str(out), "--"]
    cmd += _script("launcher.py")
    env = {**os.environ, "STOP_FILE": str(stop)}
    job = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for_status(out)
        t = time.monotonic()
        report = gpuprobe.profile_now(out, steps=2, timeout=60)
        assert time.monotonic() - t < 30  # the launcher is not waited for
        (proc,) = report.processes
        assert proc.argv[0].endswith("long_job.py") and len(report.traces) == 1
        assert any("launcher.py" in n and "not asked" in n for n in report.notes)
        assert len(gpuprobe.profile_now(out, steps=2, timeout=60).traces) == 1
    finally:
        stop.write_text("")
        _out, err = job.communicate(timeout=120)
    assert job.returncode == 0, err


def _spans_per_step(trace: str, prefix: str) -> list[int]:
    xs = [e for e in _events(trace) if e.get("ph") == "X"]
    steps = sorted(
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in xs
        if e["name"].startswith("ProfilerStep#")
    )
    starts = [float(e["ts"]) for e in xs if e["name"].startswith(prefix)]
    return [sum(1 for t in starts if a <= t < b) for a, b in steps]


def test_gradient_accumulation_steps_by_optimizer_steps_not_micro_batches(tmp_path, monkeypatch):
    monkeypatch.setenv("STEPS", "8")
    monkeypatch.setenv("ACCUM", "16")  # more micro-batches before the first step than --skip
    report = gpuprobe.profile_command(
        _script("accumulate.py"), tmp_path / "p", skip=3, warmup=1, active=3
    )
    (proc,) = report.processes
    assert proc.mode == "optimizer" and proc.steps == 8
    (trace,) = report.traces
    assert _steps_in(trace) == [4, 5, 6]
    assert _spans_per_step(trace, "enumerate(DataLoader)") == [16, 16, 16]
    assert _spans_per_step(trace, "Optimizer.step#") == [1, 1, 1]


def test_an_optimizer_closure_is_not_counted_as_optimizer_time(tmp_path, monkeypatch):
    monkeypatch.setenv("CLOSURE", "1")
    report = gpuprobe.profile_command(
        _script("accumulate.py"), tmp_path / "p", skip=3, warmup=1, active=3
    )
    assert report.processes[0].steps == 20
    (trace,) = report.traces
    # the closure's forward and backward run inside Optimizer.step's range
    assert _spans_per_step(trace, "Optimizer.step#") == [1, 1, 1]
    span = [
        float(e["dur"])
        for e in _events(trace)
        if e.get("ph") == "X" and e["name"].startswith("Optimizer.step#")
    ]
    phases = [b.host_phase_us for b in report.diagnosis.steps]
    assert all(p["backward"] > 0 for p in phases)
    # the optimizer's part is what follows the closure's backward: well under the whole range
    # (medians: one step that a loaded machine held up is no closure counted)
    assert statistics.median(p["optimizer"] for p in phases) < 0.5 * statistics.median(span)


def test_run_arms_the_hook_dormant_unless_told_not_to(tmp_path):
    code = "import json, os; print(json.loads(os.environ['GPUPROBE_PROFILE'])['mode'])"
    armed = subprocess.run(
        [PY, "-m", "gpuprobe", "run", "--out", str(tmp_path / "a"), "--", PY, "-c", code],
        capture_output=True,
        text=True,
    )
    assert armed.returncode == 0 and armed.stdout.split() == ["later"]
    assert not (tmp_path / "a" / ".gpuprobe-profile").exists()  # no torch, no status folder
    code = "import os; print(os.environ.get('GPUPROBE_PROFILE'))"
    plain = subprocess.run(
        [
            PY,
            "-m",
            "gpuprobe",
            "run",
            "--no-hook",
            "--out",
            str(tmp_path / "b"),
            "--",
            PY,
            "-c",
            code,
        ],
        capture_output=True,
        text=True,
    )
    assert plain.returncode == 0 and plain.stdout.split() == ["None"]
    assert not (tmp_path / "b" / ".gpuprobe-profile").exists()


@pytest.mark.parametrize("new_opt", ["0", "3"])
def test_two_optimizers_count_one_step_an_iteration(tmp_path, monkeypatch, new_opt):
    """A GAN's two optimizers (after_step's fast path keys on the first one's id and class):
    each iteration is one step, also while the second is rebuilt as another class every 3."""
    monkeypatch.setenv("STEPS", "12")
    monkeypatch.setenv("NEW_OPT", new_opt)
    report = gpuprobe.profile_command(
        _script("two_optimizers.py"), tmp_path / "p", skip=4, warmup=1, active=3
    )
    (proc,) = report.processes
    assert proc.mode == "optimizer" and proc.steps == 12
    (trace,) = report.traces
    assert _steps_in(trace) == [5, 6, 7]
    assert _spans_per_step(trace, "Optimizer.step#SGD") == [1, 1, 1]
    assert sum(_spans_per_step(trace, "Optimizer.step#")) == 6  # the generator's inside too
