"""Fixtures for the diagnose tests: GPU traces (recorded or synthetic) and a GPU skip."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from .traces import trace_path


def _has_nvidia_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _has_nvidia_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords and "tests/tools/diagnose" in str(item.fspath):
            item.add_marker(skip)


@pytest.fixture
def gpu_trace(tmp_path: Path) -> Callable[[str], str]:
    """``gpu_trace("launch_bound")`` -> path of that scenario's trace."""
    return lambda name: trace_path(name, tmp_path)
