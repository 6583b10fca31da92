"""Shared test support: the data folder, snapshots, and whether a GPU is present."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"


def _has_gpu() -> bool:
    try:
        from gpuprobe.platform.hardware.nvml import read_driver

        return bool(read_driver()[1])
    except Exception:
        return False


HAS_GPU = _has_gpu()


def snapshot_dict(name: str) -> dict[str, Any]:
    """A snapshot from tests/data as a dict."""
    return json.loads((DATA / name).read_text())
