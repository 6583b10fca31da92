"""What the command left running when it exited: processes started in the background (``cmd &``,
``setsid``, a daemon) that outlive it, found by ``gpuprobe run`` and written to the timeline as a
``leftovers`` event (:func:`gpuprobe.platform.proc.find_leftovers`)."""

from __future__ import annotations

from typing import Any

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.monitor.rules._common import GROUP
from gpuprobe.tools.monitor.summary import RunContext, command_text

__all__ = ["LEFTOVERS_LISTED", "leftover_processes"]

LEFTOVERS_LISTED = 20  # processes named one per line in the finding; the rest are counted
_CMD_CHARS = 60  # characters of each leftover's command line in its line
_HOW = {
    "tree": "in its tree",
    "group": "in its process group",
    "session": "in its session",
    "marker": "GPUPROBE_RUN_ID",
}


def _pids(value: Any) -> list[int]:
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, int) and not isinstance(v, bool) and v > 0]


def _line(p: dict[str, Any]) -> str | None:
    pid = p.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    words = p.get("cmdline")
    cmd = [str(w) for w in words] if isinstance(words, list) else []
    how = p.get("found_by")
    found = [_HOW[h] for h in how if h in _HOW] if isinstance(how, list) else []
    tail = f" (found: {', '.join(found)})" if found else ""
    return f"pid {pid}: {command_text(cmd, limit=_CMD_CHARS) if cmd else '?'}{tail}"


@rule("monitor-leftover-processes")
def leftover_processes(ctx: RunContext) -> list[Finding]:
    """``monitor-leftover-processes``: processes the command left running (a warning), or that
    ``--kill-leftovers`` ended (info); each one's pid and command line in the details."""
    events = [e for e in ctx.timeline.events if e.get("kind") == "leftovers"]
    if not events:
        return []
    ev = events[-1]
    procs = [p for p in ev.get("processes") or () if isinstance(p, dict)]
    lines = [ln for ln in map(_line, procs) if ln is not None]
    if not lines:
        return []
    running, ended = _pids(ev.get("still_running")), _pids(ev.get("ended"))
    details = lines[:LEFTOVERS_LISTED]
    if len(lines) > LEFTOVERS_LISTED:
        details.append(f"… and {len(lines) - LEFTOVERS_LISTED} more")
    n = len(lines)
    evidence = (
        Evidence("leftovers", n, ""),
        Evidence("ended", len(ended), ""),
        Evidence("still_running", len(running), ""),
    )
    if not running:
        return [
            Finding(
                id="monitor-leftover-processes",
                status=Status.INFO,
                title=f"{ctx.command} left {n} process(es) running; gpuprobe ended them "
                "(--kill-leftovers)",
                evidence=evidence,
                group=GROUP,
                subject="command",
                details=tuple(details),
            )
        ]
    shown = " ".join(str(p) for p in running[:LEFTOVERS_LISTED])
    more = " ..." if len(running) > LEFTOVERS_LISTED else ""
    return [
        Finding(
            id="monitor-leftover-processes",
            status=Status.WARN,
            title=f"{ctx.command} exited leaving {len(running)} process(es) running "
            "in the background",
            evidence=evidence,
            fix=f"End them (kill {shown}{more}), run with --kill-leftovers, or `wait` for "
            "them in the command",
            group=GROUP,
            subject="command",
            details=tuple(details),
        )
    ]
