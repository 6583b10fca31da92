"""The terminal summary of a recording (rich): what ran, the numbers, then the findings."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Group, RenderableType
from rich.text import Text

from gpuprobe.monitor.summary import RunSummary, command_text
from gpuprobe.report.style import STATUS_STYLE
from gpuprobe.units import NA, gib, size

__all__ = ["render_summary", "summary_html", "summary_text"]


def _na(v: object) -> str:
    return NA if v is None else str(v)


def _gib(b: int | None) -> str:
    return gib(b, 1, unit=False)


def render_summary(
    s: RunSummary, *, paths: Sequence[Path] = (), notes: Sequence[str] = ()
) -> RenderableType:
    """The summary as rich renderables (print with ``Console(stderr=True).print``)."""
    cmd = command_text(s.command)
    exit_text = "n/a" if s.exit_code is None else str(s.exit_code)
    lines: list[RenderableType] = [
        Text.assemble(
            ("gpuprobe run: ", "bold"),
            (cmd, "cyan"),
            f"  {s.duration_s:.1f} s, exit code {exit_text}, {s.samples} samples at {s.hz:g} Hz",
        )
    ]
    for g in s.gpus:
        lines.append(
            Text(
                f"  GPU {g.index} ({g.name or 'n/a'}): "
                + ("" if g.used_by_command else "not used by the command; ")
                + f"busy {g.util_mean if g.util_mean is not None else 'n/a'} % mean "
                f"(p90 {g.util_p90 if g.util_p90 is not None else 'n/a'} %), memory peak "
                f"{_gib(g.memory_peak)}/{_gib(g.memory_total)} GiB, power max "
                f"{g.power_max_w if g.power_max_w is not None else 'n/a'} W, temp max "
                f"{g.temperature_max_c if g.temperature_max_c is not None else 'n/a'} °C"
            )
        )
    h = s.host
    pegged = (
        "n/a"
        if h.main_thread_pegged_fraction is None
        else f"{100 * h.main_thread_pegged_fraction:.0f} %"
    )
    lines.append(
        Text(
            f"  host: {h.cores} cores, {_na(h.cpu_mean_percent)} % busy mean; command "
            f"{_na(h.command_cores_mean)} cores mean (peak {_na(h.command_cores_peak)}),"
            f" main thread pegged in {pegged} of samples, RSS peak {size(h.rss_peak)}"
        )
    )
    lines.append(Text("Findings", style="bold"))
    for f in s.findings:
        lines.append(
            Text.assemble((f"  {f.status.value.upper():7} ", STATUS_STYLE[f.status]), f.title)
        )
        if f.evidence:
            lines.append(Text("          " + ", ".join(str(e) for e in f.evidence), style="dim"))
        if f.fix:
            lines.append(Text.assemble(("          fix: ", "green"), f.fix))
    for note in notes:
        lines.append(Text(note, style="yellow"))
    if paths:
        lines.append(Text("wrote " + "  ".join(str(p) for p in paths), style="dim"))
    return Group(*lines)


def summary_text(s: RunSummary, *, paths: Sequence[Path] = ()) -> str:
    """The summary as plain text (``print(recording)``, ``print(run_result)``)."""
    from gpuprobe.report.reprs import capture

    return capture(lambda con: con.print(render_summary(s, paths=paths)))


def summary_html(s: RunSummary, footer: str = "") -> str:
    """The summary as notebook HTML, then ``footer`` (already HTML)."""
    from gpuprobe.report.reprs import capture_html

    return capture_html(lambda con: con.print(render_summary(s))) + footer
