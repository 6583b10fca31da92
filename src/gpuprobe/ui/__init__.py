"""How anything is shown, knowing no tool: the one status style, tables that fit the terminal, the one
progress line, charts on figures of their own, HTML parts, and the one renderer of findings."""

from __future__ import annotations

__all__: list[str] = []
