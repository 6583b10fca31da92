"""Findings as plain-text lines under a table: :func:`gpuprobe.findings.findings_lines`, which
lives with :class:`~gpuprobe.findings.Finding` (its ``__str__`` is plain text too) so that a
result's ``__str__`` below ``report/`` can use it; kept importable from here."""

from __future__ import annotations

from gpuprobe.findings import findings_lines

__all__ = ["findings_lines"]
