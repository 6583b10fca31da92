"""Every bench test writes its history into a temporary data directory, never the user's."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "gpuprobe-data"
    monkeypatch.setenv("GPUPROBE_DATA_DIR", str(d))
    return d
