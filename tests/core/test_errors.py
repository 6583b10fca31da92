"""gpuprobe's errors are what the README and docs/architecture.md say: a wrong argument
(UsageError) and bad data (InputError) are both ValueErrors, so ``except ValueError`` catches
them from real calls; every one is a GpuprobeError with exit code 2."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gpuprobe
from gpuprobe.core.errors import EXIT_USAGE, GpuprobeError, InputError, UsageError


def test_both_are_value_errors_with_exit_code_2() -> None:
    for cls in (UsageError, InputError):
        assert issubclass(cls, ValueError) and issubclass(cls, GpuprobeError)
        assert cls("x").exit_code == EXIT_USAGE
    assert gpuprobe.InputError is InputError and gpuprobe.UsageError is UsageError


def _not_a_trace(tmp: Path) -> Any:
    p = tmp / "trace.json"
    p.write_text("this is not JSON")
    return gpuprobe.diagnose(p)


def _not_a_snapshot(tmp: Path) -> Any:
    p = tmp / "inv.json"
    p.write_text('{"hello": 1}')
    return gpuprobe.load_inventory(p)


def _not_a_timeline(tmp: Path) -> Any:
    p = tmp / "timeline.jsonl"
    p.write_text("")
    return gpuprobe.read_timeline(p)


def _nan_in_a(tmp: Path) -> Any:
    np = pytest.importorskip("numpy")
    a = np.ones((4, 2))
    a[1, 0] = np.nan
    return gpuprobe.lstsq(a, np.ones(4))


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (_not_a_trace, "not a Kineto trace"),
        (_not_a_snapshot, "not a gpuprobe inventory snapshot"),
        (_not_a_timeline, "is empty"),
        (_nan_in_a, "NaN"),
    ],
)
def test_bad_data_from_python_is_caught_by_except_value_error(
    tmp_path: Path, call: Callable[[Path], Any], words: str
) -> None:
    try:
        call(tmp_path)
    except ValueError as exc:  # as the README promises
        assert isinstance(exc, InputError)
        assert words in str(exc) and "\n" not in str(exc)
    else:
        pytest.fail("no error")


def test_a_wrong_argument_is_caught_by_except_value_error() -> None:
    with pytest.raises(ValueError, match="unknown workload 'gemm'"):
        gpuprobe.bench(["gemm"])
