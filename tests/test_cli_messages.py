"""Messages a person meets, each saying what was wrong and what to do: one line, the right exit
code, no traceback (issue 15, item 7), and the set-up of item 6."""

from __future__ import annotations

import errno
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from _support import DATA
from gpuprobe.cli import main
from gpuprobe.core.findings import Evidence
from gpuprobe.core.text import url_host
from gpuprobe.tools.monitor.exporter import listen_error

ROOT = Path(__file__).resolve().parents[1]


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["doctor", "--from", ""], "--from needs a file name"),
        (["info", "--from", ""], "--from needs a file name"),
        (["bench", "--backend", ""], "--backend '' names nothing; choose from numpy"),
        (["bench", "--device", " , "], "--device ' , ' names nothing"),
        (["precision", "--budget", "0"], "give more than 0 to 60 seconds"),
        (["pack", "--rate", "it/s", "-n", "1", "--", "true"], "has no group: put the number in"),
        (["diagnose", "t.json", "--html-step", "2"], "give --html FILE too"),
        (["scale", "lstsq", "--workers", "1,99999", "--rows", "100"], "each local worker is a"),
    ],
)
def test_bad_input_says_what_to_do(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code  # type: ignore[assignment]
    assert code == 2
    assert says in _one_line(capsys)


def test_info_from_a_snapshot_shows_that_machine(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "--from", str(DATA / "t4.json")]) == 0
    out = capsys.readouterr().out
    assert "Tesla T4" in out and "recorded snapshot" in out


def test_an_unwritable_history_is_said_before_measuring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("GPUPROBE_DATA_DIR", str(blocker / "history"))
    assert main(["bench", "launch", "--backend", "numpy", "--quick"]) == 1
    err = _one_line(capsys)
    assert "cannot open the history" in err and "--no-save" in err


def test_listen_errors_name_the_real_cause() -> None:
    gai = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    msg = listen_error("nosuchhost.invalid", 9400, gai)
    assert "'nosuchhost.invalid' is not a known name or address" in msg and "--port" not in msg
    used = OSError(errno.EADDRINUSE, "Address already in use")
    assert "pick another --port" in listen_error("127.0.0.1", 9400, used)
    gone = OSError(errno.EADDRNOTAVAIL, "Cannot assign requested address")
    assert "not an address of this machine" in listen_error("10.1.2.3", 9400, gone)
    assert listen_error("::1", 9400, used).startswith("cannot listen on [::1]:9400")
    assert url_host("::1") == "[::1]" and url_host("127.0.0.1") == "127.0.0.1"


def test_export_host_that_does_not_resolve(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--host", "nosuchhost.invalid", "--port", "0"]) == 2
    err = _one_line(capsys)
    assert "not a known name or address" in err and "pick another --port" not in err


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (12040.0, "ms", "t=12.04 s"),
        (0.25, "ms", "t=250 µs"),
        (3.0 * 2**30, "B", "t=3 GiB"),
        (812, "B", "t=812 B"),
        (12040.0, "", "t=12040"),
        (2.5e-7, "", "t=2.5e-07"),
        (None, "ms", "t=n/a"),
    ],
)
def test_evidence_is_shown_in_the_unit_that_fits(value: object, unit: str, shown: str) -> None:
    assert str(Evidence("t", value, unit)) == shown  # type: ignore[arg-type]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_reinstalls_when_torch_changes(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "pip.log"
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    python.chmod(0o755)

    def make(*extra: str) -> str:
        if log.exists():
            log.unlink()
        subprocess.run(
            ["make", "-s", "-C", str(ROOT), f"VENV={venv}", *extra, "setup"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        return log.read_text() if log.exists() else ""

    first = make()
    assert "install -e .[plot] torch==2.13.0" in first
    assert make() == ""  # nothing changed: nothing installed
    again = make("TORCH=torch==2.12.0")
    assert "install -e .[plot] torch==2.12.0" in again
    assert make("TORCH=torch==2.12.0") == ""
    assert "install -e .[plot] torch==2.13.0" in make()  # back to the default: installed again
    without = make("TORCH=")  # issue 41: the torch of the run before stayed installed
    assert without.splitlines() == [
        "-m pip --disable-pip-version-check -q install -e .[plot]",
        "-m pip --disable-pip-version-check -q uninstall -y torch",
    ]
    assert make("TORCH=") == ""


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--hz", "100", "--out", "{out}", "--", "true"],
        ["run", "--hz", "0.05", "--no-hook", "--out", "{out}", "--", "true"],
        ["profile", "--hz", "0.05", "--out", "{out}", "--", "true"],
        ["run", "--out", "{out}", "--", "/nonexistent/cmd"],
        ["profile", "--out", "{out}", "--", "/"],
    ],
)
def test_a_refused_run_leaves_no_files_so_the_corrected_one_runs(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "given"
    argv = [a.replace("{out}", str(out)) for a in argv]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code  # type: ignore[assignment]
    assert code in (2, 127)
    _one_line(capsys)
    assert not out.exists()  # issue 41, item 2: not even an empty timeline
    assert main(["run", "--no-report", "--out", str(out), "--", "true"]) == 0


@pytest.mark.parametrize("call", ["run", "run-no-hook", "profile", "record"])
def test_the_api_refuses_a_sampling_rate_before_making_a_folder(tmp_path: Path, call: str) -> None:
    import gpuprobe
    from gpuprobe.core.errors import UsageError

    out = tmp_path / "given"
    with pytest.raises(UsageError, match=r"hz=100: give 0\.1 to 20 samples per second"):
        if call == "run":
            gpuprobe.run(["true"], out, hz=100)
        elif call == "run-no-hook":
            gpuprobe.run(["true"], out, hz=100, hook=False)
        elif call == "profile":
            gpuprobe.profile_command(["true"], out, hz=100)
        else:
            with gpuprobe.record(out, hz=100):
                pass
    assert not out.exists()


def test_every_sampling_command_refuses_a_rate_in_the_same_words(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gpuprobe.cli._args import MAX_HZ, MIN_HZ
    from gpuprobe.tools.monitor import sampler

    assert (MIN_HZ, MAX_HZ) == (sampler.MIN_HZ, sampler.MAX_HZ)  # the CLI's copy of the range
    said = {}
    for command, rest in (
        ("run", ["--", "true"]),
        ("profile", ["--", "true"]),
        ("pack", ["-n", "1", "--", "true"]),
        ("export", []),
    ):
        with pytest.raises(SystemExit) as exc:
            main([command, "--hz", "100", *rest])
        assert exc.value.code == 2
        said[command] = _one_line(capsys).replace(f"gpuprobe {command} --help", "HELP")
    assert len(set(said.values())) == 1, said
    assert "100: give 0.1 to 20 samples per second" in said["run"]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["info", "--jsn"], "--jsn; did you mean --json? (see 'gpuprobe info --help')"),
        (["info", "--json", "extra"], "extra (see 'gpuprobe info --help')"),
        (
            ["scale", "lstsq", "--rowz", "9"],
            "did you mean --rows? (see 'gpuprobe scale lstsq --help')",
        ),
    ],
)
def test_an_unknown_argument_points_to_its_commands_help(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert says in _one_line(capsys)


def test_a_directory_given_as_the_command_is_called_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--out", str(tmp_path / "r"), "--", str(tmp_path)]) == 127
    err = _one_line(capsys)
    assert "a directory, not a command" in err and "chmod" not in err
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n")
    assert main(["run", "--out", str(tmp_path / "r"), "--", str(script)]) == 127
    assert "not executable (chmod +x it" in _one_line(capsys)
