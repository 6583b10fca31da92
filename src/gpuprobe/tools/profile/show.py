"""How a :class:`~gpuprobe.tools.profile.model.ProfileReport` shows itself: what was profiled in
which process, then the verdict (diagnose's own view of the trace or the ranks), the run's
problems in a line each, and the files. Registered with core's render hooks."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from gpuprobe.core import render
from gpuprobe.core.files import private_subdir
from gpuprobe.core.findings import Status, status_counts
from gpuprobe.core.units import seconds
from gpuprobe.core.wrap import TEXT_WIDTH
from gpuprobe.tools.monitor.summary import command_text
from gpuprobe.tools.profile.model import ProfiledProcess, ProfileReport
from gpuprobe.ui.console import Hanging, make_console

__all__ = ["print_profile", "write_verdict_page"]


def _console(console: object | None) -> Any:
    from rich.console import Console

    return console if isinstance(console, Console) else make_console(highlight=False)


def _process_line(p: ProfiledProcess, report: ProfileReport) -> str:
    unit = {"optimizer": "optimizer steps", "dataloader": "DataLoader steps"}.get(p.mode or "")
    head = f"{p.name}: {p.steps} {unit}" if unit else f"{p.name}: imported torch, no steps"
    if not unit and not p.windows and not p.aside:
        head += " (a launcher, or no optimizer and no DataLoader)"
    parts = []
    for w in p.windows:
        if report.request is not None and w.request != report.request:
            continue
        if w.trace is None:
            parts.append(f"no trace ({w.state})")
            continue
        if w.seconds is not None:  # what was recorded, as timed: not what was asked for
            what = f"{w.seconds:g} s" if w.span_s is None else seconds(w.span_s)
        else:
            n = w.recorded_steps
            span = (
                f"step {w.recorded_from}" if n == 1 else f"steps {w.recorded_from}..{w.last_step}"
            )
            what = span + ("" if w.state == "done" else f" ({w.state})")
        parts.append(f"recorded {what}{' with CUDA' if w.cuda else ''}")
    if p.aside:
        parts.append(f"stood aside: {p.aside}")
    return head + ("; " + "; ".join(parts) if parts else "")


def print_profile(report: ProfileReport, console: object | None = None, **options: Any) -> None:
    """The report on a rich console (stdout by default): the header and processes, the verdict,
    the run's warnings, the files and notes."""
    from rich.markup import escape
    from rich.text import Text

    con = _console(console)
    cmd = command_text(report.command)
    if report.request is not None:
        con.print(
            escape(
                f"gpuprobe profile --now: request {report.request} to {report.out_dir}: "
                f"{report.window}"
            )
        )
    else:
        ended = "" if report.exit_code is None else f" → exit code {report.exit_code}"
        took = f", {seconds(report.run.duration_s)}" if report.run is not None else ""
        con.print(escape(f"gpuprobe profile: {cmd}{ended}{took}; window: {report.window}"))
    for p in report.processes:
        con.print("  " + escape(_process_line(p, report)))
    if report.diagnosis is not None or report.ranks is not None or report.verdicts:
        con.print()
    if report.diagnosis is not None:
        render.terminal(report.diagnosis, con, verbose=bool(options.get("verbose")))
    elif report.ranks is not None:
        render.terminal(report.ranks, con)
    for v in report.verdicts:
        con.print(escape(f"── pid {v.pid}: {v.trace}"))
        render.terminal(v.diagnosis, con, verbose=bool(options.get("verbose")))
    run = report.run
    if run is not None and report.request is None:
        # every finding the count counts, worst first: a count says nothing by itself
        order = (Status.FAIL, Status.WARN, Status.INFO, Status.OK, Status.SKIPPED)
        shown = sorted(run.findings, key=lambda f: order.index(f.status))
        con.print()
        con.print(escape(f"the run's timeline: {status_counts(run.findings)}"))
        for f in shown:
            con.print(Hanging(f"  {f.status.value.upper()} ", Text(f"{f.id}: {f.title}")))
    if report.files:
        con.print(Hanging("files: ", ", ".join(_short(f) for f in report.files)))
    for note in report.notes:
        con.print(escape(note))
    if report.traces:
        again = report.traces[0] if len(report.traces) == 1 else str(Path(report.traces[0]).parent)
        con.print(Hanging("see it again: ", f"gpuprobe diagnose {again}"))


def _short(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def render_text(report: ProfileReport) -> str:
    from gpuprobe.ui.reprs import capture

    return capture(lambda con: print_profile(report, con), TEXT_WIDTH)


def render_repr(report: ProfileReport) -> str:
    """One line: what ran, what was profiled, the headline."""
    what = command_text(report.command, 50) if report.command else f"request {report.request}"
    head = "no verdict"
    if report.diagnosis is not None and report.diagnosis.headline is not None:
        head = f"headline {report.diagnosis.headline.id}"
    elif report.findings:
        head = f"findings: {status_counts(report.findings)}"
    code = "" if report.exit_code is None else f"exit code {report.exit_code}, "
    return render.one_line("ProfileReport", f"{what}: {code}{len(report.traces)} trace(s), {head}")


def render_html(report: ProfileReport) -> str:
    body = html.escape(render_text(report))
    return f"<pre>{body}</pre>"


def write_verdict_page(verdict: Any, ctx: Any, out: Path) -> Path:
    """``out/diagnosis.html``: the one trace's page with its timeline, or the ranks' page."""
    path = out / "diagnosis.html"
    if not out.is_dir():
        private_subdir(out)  # now-ID/ is made 0700 by the hook; the run's folder is there
    from gpuprobe.tools.diagnose.show.html import render_html, write_page

    # 0600, as every file of the run's folder: the page shows the job's code and its trace
    if ctx is not None:
        write_page(path, render_html(verdict, ctx, None), private=True)
    else:
        page = f"<!doctype html><meta charset='utf-8'><title>gpuprobe profile</title>{render.html(verdict)}"
        write_page(path, page, private=True)  # whole or not at all
    return path


render.text.register(ProfileReport, render_text)
render.terminal.register(ProfileReport, print_profile)
render.repr_.register(ProfileReport, render_repr)
render.html.register(ProfileReport, render_html)
