"""``gpuprobe fit`` as plain text: the trials as a table, the findings under it."""

from __future__ import annotations

import textwrap

from gpuprobe.core import render
from gpuprobe.core.render import one_line
from gpuprobe.core.units import count, seconds, size
from gpuprobe.core.wrap import TEXT_WIDTH, hang_lines
from gpuprobe.tools.memory.model import FitResult, FitTrial
from gpuprobe.ui.findings import findings_lines, result_html

__all__ = ["fit_text", "trial_repr"]


def fit_text(r: FitResult) -> str:
    """The result as a plain-text table with the findings under it."""
    head = f"gpuprobe fit: batch sizes {r.smallest}..{r.largest} ({r.candidates} candidates)"
    lines = [head]
    if r.cap:
        lines += _wrapped(f"memory cap: {r.cap}")
    if r.cap_baseline is not None:
        lines += _wrapped(
            f"each trial process had {size(r.cap_baseline)} mapped when its cap was set "
            "(interpreter, torch: not counted); "
            f"{size(r.cap_overhead or 0)} of the cap was taken before the step ran"
        )
    lines += _wrapped(
        f"search: {r.search_trials} trials (bound ⌈log2 {r.candidates}⌉ + 2 = {r.trial_bound}), "
        f"tolerance {100 * r.tolerance:g} %, timer {r.timer}, "
        + ("each trial in its own process" if r.isolated else "in this process")
    )
    lines.append(f"  {'batch':>8}  {'fits':<4}  {'step':>10}  {'samples/s':>11}  {'peak mem':>10}")
    for t in r.trials:
        mark = "" if t.phase == "search" else " (curve)"
        if t.fits:
            lines.append(
                f"  {t.batch_size:>8}  {'yes':<4}  {seconds(t.median_s):>10}  "
                f"{count(t.throughput):>11}  {size(t.peak_memory):>10}{mark}"
            )
        elif t.over_cap:  # it ran, above the cap: its time is not shown as a fit's
            lines.append(
                f"  {t.batch_size:>8}  {'over':<4}  {'':>10}  {'':>11}  "
                f"{size(t.peak_memory):>10}{mark} > cap"
            )
        else:
            lines.append(f"  {t.batch_size:>8}  {'OOM':<4}  {'':>10}  {'':>11}  {'':>10}{mark}")
    lines += findings_lines(r.findings, no_details=("fit-nothing-fits",))
    return "\n".join(hang_lines(lines))  # prose under its lead at 80 columns


def _wrapped(text: str) -> list[str]:
    """A header line, wrapped to TEXT_WIDTH columns under two spaces."""
    return textwrap.wrap(text, TEXT_WIDTH, initial_indent="  ", subsequent_indent="    ")


def trial_repr(t: FitTrial) -> str:
    """``<FitTrial 8: 17 ms/step, 470 samples/s, peak 64 MiB>`` (its ``str``, in brackets)."""
    return one_line("FitTrial", f"{t} ({t.phase})")


render.text.register(FitResult, fit_text)
render.repr_.register(FitTrial, trial_repr)
render.html.register(FitResult, result_html)
