"""The flight recorder (issue 43): every step of a run's PyTorch processes, their slow ones and
drifts, and the energy a step, from the steps the hook wrote and the timeline's samples."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tl_builder import MAIN_PID, build

from gpuprobe.tools.monitor.judge import summarize
from gpuprobe.tools.monitor.steps import EVENT_STEPS, step_events

T0 = 1000.0  # the builder's recording starts here; its samples at 1000.5, 1001.0, ...


def _with_steps(tl, ends, *, pid=MAIN_PID, mode="optimizer"):
    tl.events.extend(step_events([(pid, f"pid {pid} (train.py)", mode, ends)]))
    return tl


def _ends(durations, start=T0 + 1.0):
    out, t = [start], start
    for d in durations:
        t += d
        out.append(t)
    return out


def test_a_step_every_50_slow_is_named_with_its_period_and_a_window_that_holds_the_next():
    d = [0.05] * 400
    for i in range(49, 400, 50):  # steps 50, 100, ... take 0.4 s (a checkpoint)
        d[i] = 0.4
    d[123] = 0.08  # noise: a little slow (1.6×), not slow
    s = summarize(_with_steps(build(100), _ends(d)))
    (st,) = s.steps
    assert st.steps == 401 and st.median_s == 0.05 and st.mode == "optimizer"
    assert st.slow_count == 8 and st.every == 50 and st.first_slow == 50
    assert st.slow_extra_s == pytest.approx(8 * 0.35)
    assert st.slow_share == pytest.approx(8 * 0.35 / (sum(d) - sum(d[:20])), abs=1e-4)
    assert len(st.slow) == 5 and {x.step for x in st.slow} <= set(range(50, 401, 50))
    (f,) = [f for f in s.findings if f.id == "monitor-slow-steps"]
    assert f.status.name == "WARN" and "every 50 steps from step 50" in f.title
    # the window: warm-up at step 47, steps 48..51 recorded: step 50 inside
    assert "gpuprobe profile --skip 47 --warmup 1 --active 4 -- python train.py" in f.fix
    assert f.gain == pytest.approx(st.slow_share)


def test_steady_steps_have_no_slow_step_and_no_drift():
    d = [0.02 + 0.002 * ((i * 7) % 5) for i in range(300)]  # a spread of 20..28 ms
    s = summarize(_with_steps(build(40), _ends(d)))
    (st,) = s.steps
    assert st.slow_count == 0 and st.drift == pytest.approx(1.0, abs=0.05)
    assert {f.id for f in s.findings} & {"monitor-slow-steps", "monitor-step-drift"} == set()
    (info,) = [f for f in s.findings if f.id == "monitor-steps"]
    assert "301 optimizer steps, median 24 ms" in info.title


def test_steps_that_slow_down_are_a_drift():
    d = [0.02 + 0.02 * i / 400 for i in range(400)]  # 20 ms to 40 ms
    s = summarize(_with_steps(build(40), _ends(d)))
    (f,) = [f for f in s.findings if f.id == "monitor-step-drift"]
    (st,) = s.steps
    assert 1.6 < st.drift < 2.0 and "slowed from 2" in f.title


def test_energy_a_step_from_the_counter_interpolated_at_the_step_ends():
    # 300 W: 150 J a sample at 2 Hz, the counter in mJ; 100 steps of 0.1 s from t0 + 1 s
    tl = build(40, energy_mj=lambda i: 7_000_000 + 150_000 * i)
    s = summarize(_with_steps(tl, _ends([0.1] * 100)))
    (st,) = s.steps
    assert st.joules_per_step == pytest.approx(30.0)  # 300 W × 0.1 s
    assert st.energy_method == "counter; shared out over the steps between samples"
    # no counter: the builder's 150 W × 0.1 s, an estimate from power
    (plain,) = summarize(_with_steps(build(40), _ends([0.1] * 100))).steps
    assert plain.joules_per_step == pytest.approx(15.0)
    assert plain.energy_method.startswith("power × time")


def test_a_long_runs_steps_in_several_events_read_back_in_order():
    ends = _ends([0.001] * (EVENT_STEPS + 500))
    events = step_events([(7, "pid 7 (x.py)", "dataloader", ends)])
    assert len(events) == 2 and events[1]["first"] == EVENT_STEPS
    tl = build(40)
    tl.events.extend(reversed(events))  # out of order in the file: read in step order
    (st,) = summarize(tl).steps
    assert st.steps == EVENT_STEPS + 501 and st.median_s == pytest.approx(0.001, rel=1e-3)
    assert st.slow_count == 0


def test_a_damaged_steps_event_is_skipped_and_the_rest_read():
    tl = _with_steps(build(40), _ends([0.05] * 100))
    tl.events.append({"kind": "steps", "pid": 9, "t0": "x", "ends": [1, 2]})
    tl.events.append({"kind": "steps", "pid": 10, "t0": 1.0, "ends": [[1], 2]})
    assert [st.pid for st in summarize(tl).steps] == [MAIN_PID]


def _job(steps: int, sleep: str, every: int = 0, stall: float = 0.0) -> str:
    """A training loop of ``steps`` optimizer steps on the CPU, each followed by
    ``time.sleep(SLEEP)`` (``sleep``: an expression of ``i``), and by ``stall`` s more every
    ``every`` steps (the step after i = every - 1, 2 every - 1, ... is slow)."""
    stalls = f"    if i % {every} == {every - 1}:\n        time.sleep({stall})\n" if every else ""
    return (
        "import time, torch\n"
        "m = torch.nn.Linear(16, 16)\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.01)\n"
        "x = torch.randn(8, 16)\n"
        f"for i in range({steps}):\n"
        "    m(x).square().mean().backward()\n"
        "    opt.step()\n"
        "    opt.zero_grad()\n"
        f"    time.sleep({sleep})\n" + stalls
    )


SCRIPT = _job(150, "0.004", every=50, stall=0.25)  # a checkpoint every 50 steps


def _run_json(tmp_path: Path, script: str, *flags: str) -> dict:
    """``gpuprobe run --json FLAGS --out tmp/r -- python job.py`` (job.py: ``script``): its
    summary, once the run exited 0."""
    (tmp_path / "job.py").write_text(script)
    src = str(Path(__file__).resolve().parents[3] / "src")
    r = subprocess.run(
        [sys.executable, "-m", "gpuprobe", "run", "--json", *flags, "--out",
         str(tmp_path / "r"), "--", sys.executable, "job.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": src},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_run_records_every_step_of_a_real_script_and_names_the_slow_ones(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "r"
    doc = _run_json(tmp_path, SCRIPT)
    (st,) = doc["steps"]
    assert st["steps"] == 150 and st["mode"] == "optimizer" and st["name"].endswith("(job.py)")
    # steps 50 and 100 held the sleeps (the step after opt.step() of i = 49, 99); 149 ended
    # before its sleep
    assert {50, 100} <= {s["step"] for s in st["slow"]}
    assert all(s["seconds"] >= 0.25 for s in st["slow"] if s["step"] in (50, 100))
    ids = {f["id"] for f in doc["findings"]}
    assert {"monitor-steps", "monitor-slow-steps"} <= ids
    assert not (out / ".gpuprobe-profile").exists()  # the step files went with the statuses
    lines = [json.loads(x) for x in (out / "timeline.jsonl").read_text().splitlines()]
    kinds = [x.get("kind") for x in lines]
    assert kinds.count("steps") == 1 and lines[-1]["type"] == "end"


STALLS = _job(120, "0.003", every=10, stall=0.2)  # any 12 steps recorded hold a stall


def test_capture_on_slow_profiles_steps_by_itself_and_names_the_stall(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "r"
    doc = _run_json(
        tmp_path, STALLS, "--capture-on", "slow", "--capture-steps", "12", "--capture-every", "0"
    )
    caps = [f for f in doc["findings"] if f["id"] == "monitor-captures"]
    assert caps, [f["title"] for f in doc["findings"]]
    traces = sorted(out.glob("captures/step-*/*.pt.trace.json.gz"))
    assert len(traces) == len(caps)  # each capture's trace, under captures/step-N/
    # a stall in a capture's steps, named for what the trace shows: host code between the ops
    named = [f for f in caps if "ran no traced op" in f["title"]]
    assert named and all(f["status"] == "warn" for f in named)
    assert all("steps " in f["title"] and " profiled" in f["title"] for f in caps)


# steps long enough that a loaded machine's noise is no slow step; a checkpoint every 25
# steps: steps 25, 50, 75 and 100 are slow
EVERY_25 = _job(110, "0.05", every=25, stall=0.5)


def test_a_capture_that_missed_the_stall_leaves_the_budget_and_the_period_is_caught(tmp_path):
    # the first slow step's capture records the normal steps after it; under the default
    # --capture-every (600 s) that would be the only capture. It is free instead, and once
    # the stalls recur (25, 50, 75) the window is placed on step 100, which it holds.
    pytest.importorskip("torch")
    doc = _run_json(tmp_path, EVERY_25, "--capture-on", "slow")
    caps = [f for f in doc["findings"] if f["id"] == "monitor-captures"]
    titles = [f["title"] for f in caps]
    missed = [t for t in titles if "none of them slow" in t]
    assert missed and all("not counted against --capture-every" in t for t in missed), titles
    (aimed,) = [f for f in caps if "placed on the next slow one (every 25 steps)" in f["title"]]
    assert "ran no traced op" in aimed["title"] and aimed["status"] == "warn", aimed["title"]
    assert aimed["evidence"][0]["value"] == 75  # set off by the third, placed on step 100
    assert 25 in {f["evidence"][0]["value"] for f in caps}  # the first slow step's, missed


DRIFTS = _job(400, "0.005 if i < 120 else 0.02")  # from step 120 each step is 4x as long


def test_capture_on_drift_profiles_the_drifted_steps_once(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "r"
    doc = _run_json(tmp_path, DRIFTS, "--capture-on", "drift")
    (cap,) = [f for f in doc["findings"] if f["id"] == "monitor-captures"]  # once, not per step
    assert "the steps drifted to " in cap["title"] and " profiled" in cap["title"], cap["title"]
    step = cap["evidence"][0]["value"]
    assert 120 < step < 200  # the running median crossed 1.5x its lowest after step 120
    ratio = float(cap["title"].split("drifted to ")[1].split("×")[0])
    assert ratio >= 1.5
    assert len(list(out.glob("captures/step-*/*.pt.trace.json.gz"))) == 1


def test_capture_on_something_else_is_refused_in_one_line(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "gpuprobe", "run", "--capture-on", "slow,straggler", "--out",
         str(tmp_path / "r"), "--", "true"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert (
        r.stderr.strip().splitlines()[-1].startswith("gpuprobe: --capture-on straggler: give slow")
    )
    assert not (tmp_path / "r").exists()
