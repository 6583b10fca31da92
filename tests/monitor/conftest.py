"""Shared fixtures for the monitor tests: GPU tests skip cleanly where NVML sees no GPU."""

from __future__ import annotations

import functools
import shutil

import pytest

from gpuprobe.hardware.nvml import NvmlUnavailable, nvml_session


@functools.cache
def _gpu_reason() -> str | None:
    """None when NVML sees a GPU; otherwise why not."""
    try:
        with nvml_session() as s:
            return None if s.device_count() > 0 else "NVML works but sees no GPU"
    except NvmlUnavailable as exc:
        return f"no NVIDIA GPU here ({exc})"


@pytest.fixture(autouse=True)
def _skip_without_gpu(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("gpu") is not None:
        reason = _gpu_reason()
        if reason:
            pytest.skip(reason)


@pytest.fixture
def chromium() -> str:
    """The headless browser for the report tests (Debian: apt-get install -y chromium)."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(
        "chromium is not installed (apt-get install -y chromium): the HTML report "
        "cannot be checked in a real browser here"
    )
