"""The terminal summary of a recording (rich): what ran, the numbers, then the findings."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from rich.console import Group, RenderableType
from rich.text import Text

from gpuprobe.core import render
from gpuprobe.core.render import one_line
from gpuprobe.core.units import gib, joules, size
from gpuprobe.tools.monitor.record import RECORDING_HTML_FOOTER, Recording
from gpuprobe.tools.monitor.run import RunResult
from gpuprobe.tools.monitor.summary import GpuStats, HostStats, RunSummary, command_text
from gpuprobe.tools.monitor.timeline import Timeline
from gpuprobe.ui.console import Hanging, HangingLine
from gpuprobe.ui.style import STATUS_STYLE

__all__ = ["render_summary", "summary_html", "summary_text", "timeline_repr"]

DETAILS_SHOWN = 5  # lines of a finding's details under it; the JSON and report.html have all


def _gib(b: int | None) -> str:
    return gib(b, 1, unit=False)


def _known(*parts: tuple[bool, str]) -> str:
    """The parts whose value is known, joined: a replayed recording that lacks a field (an older
    timeline, a card that does not report it) shows no "n/a" for it."""
    return ", ".join(text for known, text in parts if known)


def _gpu(g: GpuStats) -> str:
    """One GPU's line after its name."""
    return ("" if g.used_by_command else "not used by the command; ") + (
        _known(
            (
                g.util_mean is not None,
                f"busy {g.util_mean} % mean"
                + (f" (p90 {g.util_p90} %)" if g.util_p90 is not None else ""),
            ),
            (
                g.memory_peak is not None,
                f"memory peak {_gib(g.memory_peak)}"
                + (f"/{_gib(g.memory_total)}" if g.memory_total else "")
                + " GiB",
            ),
            (
                bool(g.others_pids) and g.others_sm_mean is not None,
                f"shared: the command's SMs {g.command_sm_mean} %, others' {g.others_sm_mean} %",
            ),
            (g.power_max_w is not None, f"power max {g.power_max_w} W"),
            (
                g.energy_j is not None,
                f"energy {joules(g.energy_j)}"
                + ("" if g.energy_method == "counter" else " (power × time)"),
            ),
            (g.temperature_max_c is not None, f"temp max {g.temperature_max_c} °C"),
        )
        or "no readings"
    )


def _host(h: HostStats) -> str:
    """The host's line after "host: "."""
    pegged = h.main_thread_pegged_fraction
    facts = _known(
        (h.cpu_mean_percent is not None, f"{h.cpu_mean_percent} % busy mean"),
        (  # the mean and the peak come from the same samples: both known or neither
            h.command_cores_mean is not None,
            f"command {h.command_cores_mean} cores mean (peak {h.command_cores_peak})",
        ),
        (pegged is not None, f"main thread pegged in {100 * (pegged or 0):.0f} % of samples"),
        (h.rss_peak is not None, f"RSS peak {size(h.rss_peak)}"),
    )
    return f"{h.cores} cores" + (f", {facts}" if facts else " (no host samples)")


def render_summary(
    s: RunSummary, *, paths: Sequence[Path] = (), notes: Sequence[str] = ()
) -> RenderableType:
    """The summary as rich renderables (print with ``Console(stderr=True).print``)."""
    cmd = command_text(s.command)
    ended = "" if s.exit_code is None else f" → exit code {s.exit_code}"
    lines: list[RenderableType] = [  # as profile's first line: the command, how it ended, when
        Hanging(
            Text("gpuprobe run: ", "bold"),
            Text.assemble(
                (cmd, "cyan"),
                f"{ended}, {s.duration_s:.1f} s, {s.samples} samples at {s.hz:g} Hz",
            ),
        )
    ]
    for g in s.gpus:
        gpu = f"  GPU {g.index}{f' ({g.name})' if g.name else ''}: "
        lines.append(HangingLine(Text(gpu + _gpu(g))))
    lines.append(HangingLine(Text(f"  host: {_host(s.host)}")))
    lines.append(Text("Findings", style="bold"))
    for f in s.findings:
        status = Text(f"  {f.status.value.upper():7} ", STATUS_STYLE[f.status])
        lines.append(Hanging(status, f.title))
        if f.evidence:
            evidence = Text(", ".join(str(e) for e in f.evidence), style="dim")
            lines.append(Hanging(" " * 10, evidence))
        if f.fix:
            lines.append(Hanging(Text(" " * 10 + "fix: ", "green"), f.fix))
        for line in f.details[:DETAILS_SHOWN]:  # the leftovers' pids, the damaged lines
            lines.append(Hanging(Text(" " * 10 + "· ", style="dim"), Text(line, style="dim")))
        if len(f.details) > DETAILS_SHOWN:
            more = f"… {len(f.details) - DETAILS_SHOWN} more (summary.json has them all)"
            lines.append(Hanging(" " * 10, Text(more, style="dim")))
    for note in notes:
        lines.append(HangingLine(Text(note, style="yellow")))
    if paths:
        lines.append(Hanging(Text("wrote ", "dim"), Text("  ".join(map(str, paths)), "dim")))
    return Group(*lines)


def summary_text(s: RunSummary, *, paths: Sequence[Path] = ()) -> str:
    """The summary as plain text (``print(recording)``, ``print(run_result)``)."""
    from gpuprobe.ui.reprs import capture

    return capture(lambda con: con.print(render_summary(s, paths=paths)))


def summary_html(s: RunSummary, footer: str = "") -> str:
    """The summary as notebook HTML, then ``footer`` (already HTML)."""
    from gpuprobe.ui.reprs import capture_html

    return capture_html(lambda con: con.print(render_summary(s))) + footer


def recording_text(rec: Recording) -> str:
    """A finished recording as text (``str(rec)``)."""
    return summary_text(rec.summary)


def recording_html(rec: Recording) -> str:
    """A finished recording in a notebook; the charts are ``rec.plot()``."""
    return summary_html(rec.summary, RECORDING_HTML_FOOTER)


def run_text(result: RunResult) -> str:
    """A judged run as text (``str(result)``), with the files written."""
    assert result.summary is not None
    return summary_text(result.summary, paths=result.files)


def run_html(result: RunResult) -> str:
    """A judged run in a notebook; the charts are in ``report.html``."""
    assert result.summary is not None
    return summary_html(
        result.summary,
        f"<p><small>files: {html.escape(', '.join(map(str, result.files)))}</small></p>",
    )


def timeline_repr(tl: Timeline) -> str:
    """``<Timeline run/timeline.jsonl: 51 samples over 10.1 s at 5 Hz, ended cleanly>``."""
    where = tl.path.name if tl.path is not None else "in memory"
    span = tl.samples[-1].t - tl.samples[0].t if len(tl.samples) > 1 else 0.0
    end = "ended cleanly" if tl.end is not None else "no end line"
    dropped = f", {tl.dropped_lines} lines dropped" if tl.dropped_lines else ""
    return one_line(
        "Timeline",
        f"{where}: {len(tl.samples)} samples over {span:.1f} s at {tl.header.hz:g} Hz, "
        f"{len(tl.events)} events, {end}{dropped}",
    )


def timeline_text(tl: Timeline) -> str:
    """A recording read back as text (``print(timeline)``): its summary, judged."""
    from gpuprobe.tools.monitor.judge import summarize

    return summary_text(summarize(tl))


render.text.register(Recording, recording_text)
render.text.register(RunSummary, summary_text)
render.text.register(Timeline, timeline_text)
render.repr_.register(Timeline, timeline_repr)
render.html.register(Recording, recording_html)
render.text.register(RunResult, run_text)
render.html.register(RunResult, run_html)
render.renderable.register(RunSummary, render_summary)
