"""Every command's argument parser, fuzzed: any flag with any value is either accepted or refused
with exit code 2 and one line (never a traceback), and nothing is written before validation.
Numbers have sane ranges (a batch of 10**20, a budget of inf, a 300-character path)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuprobe.cli as cli

NASTY = [
    "0", "-1", "1", "2", "99999999999999999999", "1e309", "inf", "-inf", "nan", "1e-320",
    "", " ", "x", "a" * 300, "${A}_${B}", "\x1b]0;t\x07", "1KiB", "99999999999999999999GiB",
    "65536", "-0", "0x10", "1_000", "cuda:99", "cpu", "☃", "../../etc/passwd", "0.0001",
]  # fmt: skip


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


SUBS = _subparsers()
OPTIONS = {
    name: [a for a in sub._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    for name, sub in SUBS.items()
}


@st.composite
def argv(draw: Any) -> list[str]:
    name = draw(st.sampled_from(sorted(SUBS)))
    out = [name]
    opts = OPTIONS[name]
    for _ in range(draw(st.integers(0, 3))):
        if not opts:
            break
        a = draw(st.sampled_from(opts))
        out.append(a.option_strings[-1])
        if a.nargs != 0:
            out.append(draw(st.sampled_from(NASTY) | st.text(max_size=12)))
    if draw(st.booleans()):
        out.append(draw(st.sampled_from(NASTY)))
    return out


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(args=argv())
def test_any_flag_with_any_value(args: list[str], tmp_path: Path, capsys: Any) -> None:
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        before = set(os.listdir("."))
        try:
            cli.build_parser().parse_args(args)
            code = None
        except SystemExit as exc:
            code = exc.code
        _, err = capsys.readouterr()
        assert code in (None, 0, 2), (args, code)
        if code == 2:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("gpuprobe: "), (args, err)
        assert set(os.listdir(".")) == before  # parsing writes nothing
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize(
    "args",
    [
        ["fit", "--max", "99999999999999999999"],
        ["fit", "--memory-limit", "99999999999999999999"],
        ["fit", "--memory-limit", "1KiB"],
        ["fit", "--repeats", "0"],
        ["precision", "--batch", "99999999999999999999"],
        ["precision", "--budget", "inf"],
        ["bench", "--budget", "inf"],
        ["bench", "--budget", "1e309"],
        ["bench", "--budget", "nan"],
    ],
)
def test_out_of_range_numbers_are_refused_before_work(args: list[str], capsys: Any) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.build_parser().parse_args(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"argument {args[1]}: {args[2]}: give " in err[0]


def test_a_300_character_out_is_one_line(tmp_path: Path, capsys: Any) -> None:
    long = str(tmp_path / ("a" * 300))
    assert cli.main(["run", "--out", long, "--", "true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "File name too long" in err[0]


@pytest.mark.parametrize("budget", [float("inf"), float("nan"), 0.0, 61.0])
def test_the_bench_api_refuses_an_endless_budget(budget: float) -> None:
    from gpuprobe.core.errors import UsageError
    from gpuprobe.tools.bench.runner import run_bench as bench

    with pytest.raises(UsageError, match="at most 60 s"):
        bench(["launch"], budget_s=budget, save=False)


def test_the_fit_api_keeps_a_huge_range_lazy(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuprobe.platform.frameworks import torch_memory
    from gpuprobe.tools.memory.fit import fit

    # the step allocates nothing, so the garbage collection before and after each trial is only
    # counted here: ~84 full collections of the whole test process took up to a minute
    released: list[None] = []
    monkeypatch.setattr(torch_memory, "release_memory", lambda: released.append(None))
    # 10**12 candidates: a list would not fit in memory; the search tries ~log2 of them
    r = fit(lambda b: None, range(1, 10**12), repeats=1, curve=False)
    assert r.best == 10**12 - 1 and r.candidates == 10**12 - 1
    assert len(r.trials) <= r.trial_bound <= 42
    assert len(released) >= len(r.trials)  # memory is still given back around each trial
