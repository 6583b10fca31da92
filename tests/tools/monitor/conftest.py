"""Shared fixtures for the monitor tests (``gpu`` tests skip through tests/conftest.py)."""

from __future__ import annotations

import shutil

import pytest


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
