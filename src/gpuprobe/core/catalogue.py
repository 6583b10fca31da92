"""The finding catalogue: every finding id gpuprobe can emit, declared once.

The entries are data, ``catalogue.json`` beside this module (shipped in the wheel): per id, the
tool that emits it, a short generic title, what it means, the usual fix, the dotted names of the
module-level constants that decide it, and the statuses it can have. An id may hold a placeholder,
``{framework}-import-failed``, standing for each value the file lists under ``placeholders``
(``torch-import-failed``, ``cupy-import-failed``, …).

The file is read once, on first use, so ``import gpuprobe`` stays cheap. ``docs/findings.md`` is
generated from it::

    python -m gpuprobe.core.catalogue > docs/findings.md

and tests/core/test_catalogue.py checks that the code emits no id the catalogue lacks, that the
catalogue holds none that nothing emits, and that the page is up to date.
"""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from gpuprobe.core.records import Record

__all__ = [
    "TOOLS",
    "Entry",
    "catalogue",
    "entry",
    "find",
    "main",
    "markdown",
    "placeholders",
    "threshold_value",
]

TOOLS: tuple[str, ...] = ("doctor", "bench", "monitor", "diagnose", "memory", "scale", "fleet")
_STATUS_ORDER = ("fail", "warn", "info", "ok", "skipped")  # worst first, as findings are shown
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Entry(Record):
    """One finding id: who emits it, what it means, its usual fix and what decides it."""

    id: str
    tool: str
    title: str
    meaning: str
    fix: str = ""
    thresholds: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()


@cache
def _load() -> tuple[
    dict[str, Entry], dict[str, tuple[str, ...]], tuple[tuple[re.Pattern[str], str], ...]
]:
    text = resources.files("gpuprobe.core").joinpath("catalogue.json").read_text(encoding="utf-8")
    data = json.loads(text)
    holders = {k: tuple(v) for k, v in data.get("placeholders", {}).items()}
    entries = {e["id"]: Entry.from_dict(e) for e in data["findings"]}
    patterns = []
    for fid in entries:
        if not _PLACEHOLDER.search(fid):
            continue
        parts = _PLACEHOLDER.split(fid)  # literal, name, literal, name, ..., literal
        regex = "".join(
            re.escape(p) if i % 2 == 0 else "(?:" + "|".join(map(re.escape, holders[p])) + ")"
            for i, p in enumerate(parts)
        )
        patterns.append((re.compile(regex), fid))
    return entries, holders, tuple(patterns)


def catalogue() -> dict[str, Entry]:
    """Every entry by id (ids with a placeholder as written: ``{framework}-ok``), in the file's
    order: by tool, then as each tool emits them."""
    return dict(_load()[0])


def placeholders() -> dict[str, tuple[str, ...]]:
    """What each placeholder of an id stands for: ``{"framework": ("torch", ...)}``."""
    return dict(_load()[1])


def find(finding_id: str) -> Entry | None:
    """The entry of an emitted id (``torch-ok`` finds ``{framework}-ok``), or None."""
    entries, _, patterns = _load()
    if finding_id in entries:
        return entries[finding_id]
    for pattern, fid in patterns:
        if pattern.fullmatch(finding_id):
            return entries[fid]
    return None


def entry(finding_id: str) -> Entry:
    """The entry of an emitted id; KeyError when the catalogue lacks it."""
    found = find(finding_id)
    if found is None:
        raise KeyError(f"finding id {finding_id!r} is not in the catalogue")
    return found


def threshold_value(name: str) -> Any:
    """The value of a threshold named ``package.module.CONSTANT`` (imports the module)."""
    module, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def _md(text: str) -> str:
    """Text safe in Markdown outside its `code spans`: ``<uuid>`` is not a tag, ``a*b`` not
    emphasis."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code spans
        parts = [text.replace("`", "\\`")]
    return "`".join(
        re.sub(r"([\\<*])", r"\\\1", p) if i % 2 == 0 else p for i, p in enumerate(parts)
    )


def markdown() -> str:
    """docs/findings.md: every finding by tool, with its meaning, fix and thresholds' values."""
    entries = catalogue()
    holders = placeholders()
    lines = [
        "# Findings",
        "",
        "<!-- generated from src/gpuprobe/core/catalogue.json by "
        "`python -m gpuprobe.core.catalogue > docs/findings.md`; do not edit by hand -->",
        "",
        "Every finding id gpuprobe emits, by the tool that emits it: what it means, the usual fix "
        "(the finding itself gives the one that fits the case), the statuses it can have and the "
        "thresholds that decide it, with their values.",
    ]
    for name, values in holders.items():
        lines += ["", f"`{{{name}}}` in an id stands for each of: {', '.join(values)}."]
    for tool in TOOLS:
        mine = [e for e in entries.values() if e.tool == tool]
        if not mine:
            continue
        lines += ["", f"## {tool}", ""]
        lines += [f"- [`{e.id}`](#{_anchor(e.id)}): {_md(e.title)}" for e in mine]
        for e in mine:
            statuses = sorted(e.statuses, key=_STATUS_ORDER.index)
            lines += ["", f"### {e.id}", "", f"**{_md(e.title)}** ({', '.join(statuses)})", ""]
            lines.append(_md(e.meaning))
            if e.fix:
                lines += ["", f"Fix: {_md(e.fix)}"]
            if e.thresholds:
                lines += ["", "Thresholds:", ""]
                for t in e.thresholds:
                    lines.append(f"- `{t.rpartition('.')[2]}` = `{threshold_value(t)!r}` ({t})")
    return "\n".join(lines) + "\n"


def _anchor(finding_id: str) -> str:
    """GitHub's anchor for a ``### id`` heading."""
    return re.sub(r"[^\w\- ]", "", finding_id.lower()).replace(" ", "-")


def main() -> None:
    """Print docs/findings.md."""
    print(markdown(), end="")


if __name__ == "__main__":
    main()
