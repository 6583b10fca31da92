"""Another local user can read, steer or overwrite nothing of a job under ``gpuprobe run`` or
``gpuprobe profile`` (issue 40, group 2; issue 41 #20).

Each attack of the issue is played for real: as root, the attacker's files are another uid's and
the attacker's steps run in a child that drops to that uid (``tests/_two_users.py``); the
victim is this process. Tests that need the second user skip, saying so, where the suite does
not run as root; the others run everywhere."""

from __future__ import annotations

import importlib
import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import psutil
import pytest

import gpuprobe
from _two_users import OTHER, as_other, drop, give, other_uid, shared_dir
from gpuprobe.core.errors import InputError
from gpuprobe.tools.profile.hook import HOOK_DIR
from gpuprobe.tools.profile.ondemand import find_job

SCRIPTS = Path(__file__).parent / "scripts"
PY = sys.executable
SECRET = "the victim's own words\n"


def _mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


@pytest.fixture
def shared() -> Iterator[Path]:
    with shared_dir() as path:
        yield path


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A 0600 file of the victim's that a planted link points to."""
    path = tmp_path / "secret.txt"
    path.write_text(SECRET)
    path.chmod(0o600)
    return path


def _gpuprobe(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "gpuprobe", *args], capture_output=True, text=True, timeout=120, **kwargs
    )


# -- an --out folder that is not the user's own ------------------------------------------------


def test_an_out_folder_another_user_made_is_refused_and_its_links_never_followed(
    shared: Path, secret: Path
) -> None:
    other_uid()
    out = shared / "out"
    planted = as_other(
        ("mkdir", out, 0o777),
        ("mkdir", out / "traces", 0o777),
        ("symlink", secret, out / "traces" / "trace.json.gz"),
        ("symlink", secret, out / "summary.json"),
        ("mkdir", out / ".gpuprobe-profile", 0o777),
        ("write", out / ".gpuprobe-profile" / "request.json", '{"id": "x", "steps": 1000000}'),
    )
    assert planted == ["ok"] * 6
    before = sorted(p.name for p in out.rglob("*"))
    why = (
        f"gpuprobe: --out {out} belongs to uid {OTHER}, not you; give a folder of your own "
        "(gpuprobe makes a new one 0700)\n"
    )
    for command in ("run", "profile"):
        done = _gpuprobe(command, "--out", str(out), "--", PY, "-c", "pass")
        assert (done.returncode, done.stderr) == (2, why), command
    with pytest.raises(InputError, match=f"belongs to uid {OTHER}, not you"), gpuprobe.record(out):
        pass
    assert secret.read_text() == SECRET and _mode(secret) == 0o600
    assert sorted(p.name for p in out.rglob("*")) == before  # nothing made, nothing deleted
    assert {os.lstat(p).st_uid for p in out.rglob("*")} == {OTHER}


def test_a_folder_of_ones_own_that_others_can_write_in_is_refused(tmp_path: Path) -> None:
    for mode in (0o777, 0o1777, 0o773):
        out = tmp_path / f"open-{mode:o}"
        out.mkdir()
        out.chmod(mode)
        with pytest.raises(InputError) as refused:
            gpuprobe.run([PY, "-c", "pass"], out, report=False)
        assert refused.value.message == (
            f"--out {out} can be written by other users (mode {mode:04o}); give a folder only "
            f"you can write in, or run: chmod go-w {out}"
        )
        assert list(out.iterdir()) == []
    mine = tmp_path / "mine"
    mine.mkdir()
    mine.chmod(0o755)  # the user's own choice of mode is kept
    assert gpuprobe.run([PY, "-c", "pass"], mine, report=False).exit_code == 0
    assert _mode(mine) == 0o755 and _mode(mine / "timeline.jsonl") == 0o600


def test_a_group_writable_folder_is_refused_when_the_group_is_not_the_users_alone(
    tmp_path: Path,
) -> None:
    other_uid()
    out = tmp_path / "team"
    out.mkdir()
    os.chown(out, -1, OTHER)  # a group with no account of its own: others may be in it
    out.chmod(0o770)
    with pytest.raises(InputError, match=r"can be written by other users \(mode 0770\)"):
        gpuprobe.run([PY, "-c", "pass"], out, report=False)


# -- what a profiled job leaves: one policy, nothing another user can read --------------------


def test_another_user_can_read_or_delete_nothing_of_a_profiled_job(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other_uid()
    monkeypatch.setenv("STEPS", "12")
    monkeypatch.chdir(SCRIPTS)  # the scripts import their _common module from beside them
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))  # torch's .gz export used to leave its .tmp here
    out = shared / "job"
    out.mkdir()
    out.chmod(0o755)  # a folder of the victim's own, readable by all: its files still are not
    argv = [PY, str(SCRIPTS / "starved.py")]
    report = gpuprobe.profile_command(argv, out, skip=2, warmup=1, active=2, hz=5)
    assert report.exit_code == 0 and report.diagnosis is not None
    (trace,) = report.traces
    assert Path(trace).parent == out / "traces"
    # one policy: every file 0600, every folder gpuprobe made 0700; the one the user made kept
    tree = {p.relative_to(out).as_posix(): _mode(p) for p in out.rglob("*")}
    assert tree == {
        "traces": 0o700,
        f"traces/{Path(trace).name}": 0o600,
        "timeline.jsonl": 0o600,
        "summary.json": 0o600,
        "report.html": 0o600,
        "report.png": 0o600,
        "diagnosis.html": 0o600,
    }, tree
    assert _mode(out) == 0o755
    # no export of gpuprobe's in $TMPDIR (torch keeps a cache folder of its own there)
    assert [p.name for p in tmp.iterdir() if not p.name.startswith("torchinductor_")] == []
    tried = as_other(
        ("read", out / "diagnosis.html"),
        ("read", out / "timeline.jsonl"),
        ("read", out / "summary.json"),
        ("list", out / "traces"),
        ("read", trace),
        ("unlink", out / "report.html"),
    )
    assert tried == ["EACCES"] * 6
    assert (out / "report.html").is_file()


class _FakeProfiler:
    """Writes a plain trace where it is told, as torch.profiler's export does."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.written: list[tuple[str, int]] = []

    def export_chrome_trace(self, path: str) -> None:
        with open(path, "w") as f:
            f.write('{"traceEvents": []}')
        with open(path + ".tmp", "w") as f:  # what Kineto leaves when killed mid-save
            f.write("{")
        self.written.append((path, _mode(Path(path))))
        if self.fail:
            raise RuntimeError("killed mid-export")


def test_a_trace_is_exported_inside_its_private_folder_only(
    tmp_path: Path, hook_module: ModuleType
) -> None:
    import gzip

    parts = sys.modules["_gpuprobe_parts"]
    traces = tmp_path / "traces"
    parts.private_dir(str(traces))
    target = traces / "host_1.pt.trace.json.gz"
    prof = _FakeProfiler()
    parts.export_private(prof, str(target))
    ((plain, _),) = prof.written
    assert Path(plain).parent == traces  # never $TMPDIR, where others can read it
    assert gzip.decompress(target.read_bytes()) == b'{"traceEvents": []}'
    assert _mode(traces) == 0o700 and _mode(target) == 0o600
    assert [p.name for p in traces.iterdir()] == [target.name]  # no temporary left
    with pytest.raises(RuntimeError):
        parts.export_private(_FakeProfiler(fail=True), str(traces / "host_2.pt.trace.json.gz"))
    assert [p.name for p in traces.iterdir()] == [target.name]


def test_a_command_that_never_imports_torch_leaves_no_status_folder(tmp_path: Path) -> None:
    for how in ("run", "profile"):
        out = tmp_path / how
        done = _gpuprobe(how, "--out", str(out), "--", "sh", "-c", "exit 0")
        assert done.returncode == 0, done.stderr
        assert not (out / ".gpuprobe-profile").exists()
        assert (out / "timeline.jsonl").is_file()


# -- the status folder and the request ----------------------------------------------------------


def test_a_status_folder_someone_else_made_is_refused_and_its_request_left(
    tmp_path: Path,
) -> None:
    other_uid()
    out = tmp_path / "job"
    control = out / ".gpuprobe-profile"
    control.mkdir(parents=True)
    request = control / "request.json"
    request.write_text(json.dumps({"id": "evil", "steps": 1_000_000, "t": time.time() + 60}))
    give(control, mode=0o777)
    give(request)
    with pytest.raises(InputError) as refused:
        gpuprobe.run([PY, "-c", "pass"], out)
    assert refused.value.message == (
        f"{control} belongs to uid {OTHER}, not you; gpuprobe trusts no request or status in "
        "it: give a folder of your own"
    )
    assert request.is_file() and not (out / "timeline.jsonl").exists()  # nothing ran


def test_a_status_folder_others_can_write_in_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "job"
    control = out / ".gpuprobe-profile"
    control.mkdir(parents=True)
    control.chmod(0o777)
    (control / "request.json").write_text('{"id": "x", "steps": 3}')
    with pytest.raises(InputError) as refused:
        gpuprobe.run([PY, "-c", "pass"], out)
    assert refused.value.message == (
        f"{control} can be written by other users (mode 0777); gpuprobe trusts no request or "
        f"status in it: remove it (rm -r {control}) and try again"
    )
    assert (control / "request.json").is_file() and not (out / "timeline.jsonl").exists()


def test_a_linked_status_folder_is_refused_and_nothing_in_its_target_deleted(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in ("proc-1.json", "request.json", "notes.txt"):
        (elsewhere / name).write_text("kept")
    out = tmp_path / "job"
    out.mkdir()
    (out / ".gpuprobe-profile").symlink_to(elsewhere)
    why = (
        f"gpuprobe: {out}/.gpuprobe-profile is a link or a file, not gpuprobe's status folder; "
        f"remove it (rm {out}/.gpuprobe-profile) and try again\n"
    )
    done = _gpuprobe("run", "--out", str(out), "--", PY, "-c", "pass")
    assert (done.returncode, done.stderr) == (2, why)
    with pytest.raises(InputError, match="is a link or a file, not gpuprobe's status folder"):
        find_job(str(out))
    assert sorted(p.name for p in elsewhere.iterdir()) == [
        "notes.txt",
        "proc-1.json",
        "request.json",
    ]


@pytest.fixture
def hook_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The hook's own module, as the command's processes import it (standalone)."""
    monkeypatch.syspath_prepend(str(HOOK_DIR))
    names = ("_gpuprobe_profile", "_gpuprobe_parts", "_gpuprobe_private")
    yield importlib.import_module("_gpuprobe_profile")
    for name in names:
        sys.modules.pop(name, None)


def _hook(module: ModuleType, out: Path):  # type: ignore[no-untyped-def]
    hook = module._Hook({"dir": str(out), "mode": "later"})
    hook.t_torch = 0.0  # torch came in before any request
    return hook


def test_the_hook_obeys_only_a_request_its_own_user_wrote(
    tmp_path: Path, hook_module: ModuleType
) -> None:
    out = tmp_path / "job"
    control = out / ".gpuprobe-profile"
    control.mkdir(parents=True, mode=0o700)
    request = control / "request.json"
    request.write_text(json.dumps({"id": "mine", "steps": 3, "warmup": 1, "t": 1.0}))
    mine = _hook(hook_module, out)
    mine._poll()
    assert mine.pending is not None and mine.pending["request"] == "mine"  # taken: its own
    # a link to a request file (of the user's own, even) is not followed
    real = tmp_path / "real.json"
    real.write_text(json.dumps({"id": "linked", "steps": 3, "t": 1.0}))
    request.unlink()
    request.symlink_to(real)
    linked = _hook(hook_module, out)
    with pytest.raises(OSError):
        linked._poll()
    assert linked.pending is None and linked.requests == {}
    if os.geteuid() != 0:
        return  # no other uid to give the file to (see other_uid)
    request.unlink()
    request.write_text(json.dumps({"id": "evil", "steps": 1_000_000, "t": 1.0}))
    give(request)
    victim = _hook(hook_module, out)
    with pytest.raises(PermissionError, match=f"written by uid {OTHER}"):
        victim._poll()
    assert victim.pending is None and victim.requests == {}


def test_the_hooks_status_is_private_and_never_written_through_a_link(
    tmp_path: Path, secret: Path, hook_module: ModuleType
) -> None:
    out = tmp_path / "job"
    out.mkdir()
    hook = _hook(hook_module, out)
    sys_argv = sys.argv
    sys.argv = ["train.py", "--api-token=s3cret"]
    try:
        hook.write_status()
        control = out / ".gpuprobe-profile"
        status = control / f"proc-{os.getpid()}.json"
        assert (_mode(control), _mode(status)) == (0o700, 0o600)
        assert "s3cret" in status.read_text()  # what the mode protects
        status.unlink()
        status.symlink_to(secret)  # a link at the status's name is replaced, never followed
        hook.write_status()
    finally:
        sys.argv = sys_argv
    assert secret.read_text() == SECRET
    assert stat.S_ISREG(os.lstat(status).st_mode) and _mode(status) == 0o600
    assert sorted(p.name for p in control.iterdir()) == [status.name]  # no temporary left


def _status(out: Path, pid: int) -> None:
    control = out / ".gpuprobe-profile"
    control.mkdir(parents=True, mode=0o700, exist_ok=True)
    doc = {"pid": pid, "mode": "optimizer", "steps": 40, "argv": ["train.py"], "requests": {}}
    (control / f"proc-{pid}.json").write_text(json.dumps(doc))


def test_now_writes_its_request_privately_and_never_through_a_planted_link(
    tmp_path: Path, secret: Path
) -> None:
    out = tmp_path / "job"
    job = subprocess.Popen(["sleep", "30"])
    try:
        _status(out, job.pid)
        control = out / ".gpuprobe-profile"
        (control / "request.tmp").symlink_to(secret)  # the fixed name it once wrote through
        (control / "request.json").symlink_to(secret)
        report = gpuprobe.profile_now(out, steps=2, timeout=0.3)
    finally:
        job.kill()
        job.wait()
    assert secret.read_text() == SECRET and _mode(secret) == 0o600
    request = control / "request.json"
    assert stat.S_ISREG(os.lstat(request).st_mode) and _mode(request) == 0o600
    assert json.loads(request.read_text())["id"] == report.request
    assert any("did not take the request within 0.3 s" in n for n in report.notes)


# -- --now PID ----------------------------------------------------------------------------------


def _children(pid: int, n: int) -> list[int]:
    end = time.monotonic() + 10
    while True:
        kids = psutil.Process(pid).children()
        if len(kids) >= n and all(
            "GPUPROBE_PROFILE" in k.environ() for k in kids if k.name() == "sleep"
        ):
            return [k.pid for k in kids]
        assert time.monotonic() < end, "the children did not start"
        time.sleep(0.02)


def _launcher(*outs: Path, timeline: bool = True) -> subprocess.Popen[bytes]:
    """A stand-in for ``gpuprobe run``'s own process: its children carry the hook's settings
    for ``outs`` (one job each), it does not, and (with ``timeline``) it holds each job's
    timeline open, as gpuprobe does while the job runs."""
    script = "".join(
        f'exec {3 + i}>>"{o}/timeline.jsonl"; ' for i, o in enumerate(outs) if timeline
    )
    script += "".join(
        f'GPUPROBE_PROFILE="$JOB{i}" exec sleep 30 {3 + i}>&- & ' for i in range(len(outs))
    )
    env = {**os.environ, **{f"JOB{i}": json.dumps({"dir": str(o)}) for i, o in enumerate(outs)}}
    return subprocess.Popen(["sh", "-c", script + "wait"], env=env)


def test_now_by_pid_takes_the_process_or_gpuprobes_own_children_never_a_job_further_down(
    tmp_path: Path,
) -> None:
    out, other = tmp_path / "job", tmp_path / "job2"
    _status(out, 1)
    _status(other, 1)
    one = _launcher(out)
    two = _launcher(out, other)
    orphans = _launcher(out, timeline=False)  # init's pid, over a job whose gpuprobe died
    try:
        (command,) = _children(one.pid, 1)
        assert find_job(str(command)) == out  # one of the job's processes
        assert find_job(str(one.pid)) == out  # gpuprobe's own process: its child
        # an ancestor (this test, as a shell would be) is not the job: no job further down
        with pytest.raises(InputError) as refused:
            find_job(str(os.getpid()))
        assert refused.value.message == (
            f"process {os.getpid()} was not started under gpuprobe run or gpuprobe profile "
            "--later (no profiling hook in it, and it is not gpuprobe's own process); give the "
            "job's --out folder, or start it so: gpuprobe profile --later -- CMD"
        )
        _children(two.pid, 2)
        with pytest.raises(InputError, match=f"process {two.pid} started 2 jobs"):
            find_job(str(two.pid))
        _children(orphans.pid, 1)
        with pytest.raises(InputError, match=f"process {orphans.pid} was not started under"):
            find_job(str(orphans.pid))
    finally:
        for p in (one, two, orphans):
            for kid in psutil.Process(p.pid).children():
                kid.kill()
            p.kill()
            p.wait()


def test_now_on_another_users_process_or_folder_is_refused_as_not_theirs(
    tmp_path: Path,
) -> None:
    other_uid()
    theirs = subprocess.Popen(["sleep", "30"], preexec_fn=drop)
    try:
        done = _gpuprobe("profile", "--now", str(theirs.pid))
    finally:
        theirs.kill()
        theirs.wait()
    assert (done.returncode, done.stderr) == (
        2,
        f"gpuprobe: process {theirs.pid} belongs to uid {OTHER}, not you; only its owner can "
        "profile it (run gpuprobe profile --now as that user)\n",
    )
    out = tmp_path / "their-job"
    _status(out, 1)
    give(out)
    with pytest.raises(InputError) as refused:
        find_job(str(out))
    assert refused.value.message == (
        f"{out} belongs to uid {OTHER}, not you; only its owner can profile the job in it "
        "(run gpuprobe profile --now as that user)"
    )


def test_now_on_a_process_hidden_from_this_user_says_whose_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def hidden(self: psutil.Process) -> object:  # /proc mounted hidepid=2
        raise psutil.AccessDenied(self.pid)

    monkeypatch.setattr(psutil.Process, "uids", hidden)
    with pytest.raises(InputError) as refused:
        find_job(str(os.getpid()))
    assert refused.value.message == (
        f"process {os.getpid()} belongs to another user, not you; only its owner can profile it "
        "(run gpuprobe profile --now as that user)"
    )
