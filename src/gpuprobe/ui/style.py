"""The one table of how a :class:`~gpuprobe.core.findings.Status` looks: its rich style in the
terminal, its short label in the doctor's table, its colour in HTML."""

from __future__ import annotations

from gpuprobe.core.findings import Status

__all__ = ["STATUS_COLORS", "STATUS_LABEL", "STATUS_STYLE"]

STATUS_STYLE: dict[Status, str] = {  # rich styles
    Status.FAIL: "bold red",
    Status.WARN: "yellow",
    Status.INFO: "cyan",
    Status.OK: "green",
    Status.SKIPPED: "dim",
}
STATUS_LABEL: dict[Status, str] = {  # the doctor's status column (FAIL in capitals)
    Status.FAIL: "FAIL",
    Status.WARN: "warn",
    Status.INFO: "info",
    Status.OK: "ok",
    Status.SKIPPED: "skip",
}
STATUS_COLORS: dict[Status, str] = {  # HTML (GitHub's palette, readable on white)
    Status.FAIL: "#cf222e",
    Status.WARN: "#9a6700",
    Status.INFO: "#0969da",
    Status.OK: "#1a7f37",
    Status.SKIPPED: "#6e7781",
}
