"""Each command's table output in an 80-column terminal, piped and not: no number is cut ("40…"),
tables fit by wrapping or by leaving out their least useful columns (and say which)."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "tools" / "monitor"))
from cli_helper import env, gpuprobe_argv

DATA = Path(__file__).parents[1] / "data"
WIDTH = 80
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Z0-9]|\x1b[=>]")
BOX = set("│┃┏┓┗┛┡┩━─┌┐└┘├┤┼╭╮╰╯")


def _env() -> dict[str, str]:
    e = env()
    e.update(COLUMNS=str(WIDTH), LINES="50", TERM="xterm")
    e.pop("FORCE_COLOR", None)
    e.pop("TTY_COMPATIBLE", None)
    return e


def _piped(args: tuple[str, ...], cwd: Path, stream: str = "stdout") -> str:
    r = subprocess.run(
        gpuprobe_argv(*args), capture_output=True, text=True, env=_env(), cwd=cwd, timeout=300
    )
    assert r.returncode in (0, 1), r.stderr
    return str(getattr(r, stream))


def _terminal(args: tuple[str, ...], cwd: Path) -> str:
    """stdout on a pty of 80 columns (stderr piped, so no progress bar mixes in)."""
    master, slave = pty.openpty()
    import fcntl
    import struct
    import termios

    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, WIDTH, 0, 0))
    proc = subprocess.Popen(
        gpuprobe_argv(*args),
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=subprocess.PIPE,
        env=_env(),
        cwd=cwd,
    )
    os.close(slave)
    out = b""
    end = time.monotonic() + 300
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert proc.returncode in (0, 1), proc.stderr.read() if proc.stderr else ""
    text = ANSI.sub("", out.decode(errors="replace")).replace("\r\n", "\n").replace("\r", "")
    return text


def _boxed(text: str) -> list[str]:
    """Every line of a rich rendering (boxes, panels, wrapped text)."""
    return text.splitlines()


def _between(start: str, stop: Callable[[str], bool]) -> Callable[[str], list[str]]:
    """The lines of a plain-text table: from the header that starts with ``start`` to the first
    line for which ``stop`` holds."""

    def pick(text: str) -> list[str]:
        lines = text.splitlines()
        i = next(i for i, line in enumerate(lines) if line.lstrip().startswith(start))
        out = []
        for line in lines[i:]:
            if stop(line):
                break
            out.append(line)
        assert len(out) >= 2, text  # a header and a row at least
        return out

    return pick


SPIN = (sys.executable, "-c", "sum(range(3 * 10**6))")
COMMANDS: dict[str, tuple[tuple[str, ...], Callable[[str], list[str]]]] = {
    "info": (("info",), _boxed),
    "doctor": (("doctor", "--from", str(DATA / "t4.json")), _boxed),
    "bench": (
        (
            "bench",
            "launch",
            "matmul",
            "transfer",
            "--backend",
            "numpy",
            "--quick",
            "--no-save",
            "--budget",
            "0.02",
        ),
        _boxed,
    ),
    "top": (("top", "--once"), _boxed),
    "pack": (
        ("pack", "-n", "1,2", "--", *SPIN),
        _between("N  ", lambda s: s.lstrip().startswith("* recommended")),
    ),
    "precision": (
        (
            "precision",
            "--device",
            "cpu",
            "--dtypes",
            "fp32,bf16",
            "--budget",
            "0.02",
            "--batch",
            "2",
        ),
        _between("dtype", lambda s: s.lstrip().startswith("[")),
    ),
    "scale": (
        ("scale", "lstsq", "--rows", "2000", "--cols", "20", "--workers", "1,2", "--threads"),
        _between("method", lambda s: not s.strip() or s.startswith("left out")),
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("how", ["piped", "terminal"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_tables_fit_80_columns_without_cutting_a_number(
    command: str, how: str, tmp_path: Path
) -> None:
    args, table_lines = COMMANDS[command]
    text = (_piped if how == "piped" else _terminal)(args, tmp_path)
    assert text.strip(), f"{command} printed nothing"
    assert "…" not in text, [line for line in text.splitlines() if "…" in line]
    lines = table_lines(text)
    too_wide = [line for line in lines if len(line.rstrip()) > WIDTH]
    assert not too_wide, too_wide
    if command in ("info", "doctor", "bench", "top"):
        assert any(set(line) & BOX for line in lines) or command == "top"
    # the figures are all there: every number in a table row is whole (no digit run cut short)
    for line in lines:
        assert not re.search(r"\d…", line)


def test_run_summary_keeps_every_number_when_piped(tmp_path: Path) -> None:
    text = _piped(
        ("run", "--hz", "5", "--no-report", "--out", str(tmp_path / "r"), "--", *SPIN),
        tmp_path,
        "stderr",  # the summary goes to stderr, beside the command's own output
    )
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= WIDTH
    assert re.search(r"→ exit code 0, \d+\.\d s, \d+ samples at 5 Hz", " ".join(text.split()))


def test_fit_and_plain_tables_fit_when_asked(tmp_path: Path) -> None:
    from gpuprobe.tools.memory.fit import fit
    from gpuprobe.tools.memory.show.fit import fit_text as render_text

    r = fit(lambda b: sum(range(b * 1000)), [1, 2, 4, 8, 16], repeats=1)
    text = render_text(r)
    table = _between("batch", lambda s: s.lstrip().startswith("["))(text)
    assert all(len(line) <= WIDTH for line in table), table
