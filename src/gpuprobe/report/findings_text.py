"""Findings as plain-text lines under a table (the memory and pack reports' ``__str__``)."""

from __future__ import annotations

from collections.abc import Iterable

from gpuprobe.findings import Finding

__all__ = ["findings_lines"]


def findings_lines(
    findings: Iterable[Finding],
    *,
    skip: tuple[str, ...] = (),
    no_details: tuple[str, ...] = (),
    no_fix: tuple[str, ...] = (),
) -> list[str]:
    """``  [status] title``, then ``- detail`` lines and ``fix:``; ids in ``skip`` are left
    out, those in ``no_details`` / ``no_fix`` shown without them."""
    lines: list[str] = []
    for f in findings:
        if f.id in skip:
            continue
        lines.append(f"  [{f.status.value}] {f.title}")
        if f.id not in no_details:
            lines.extend(f"         - {d}" for d in f.details)
        if f.fix and f.id not in no_fix:
            lines.append(f"         fix: {f.fix}")
    return lines
