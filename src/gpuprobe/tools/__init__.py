"""One package per tool, named like its command: its results (model), its rules, the engine that
produces the results, and show (its views)."""

from __future__ import annotations

__all__: list[str] = []
