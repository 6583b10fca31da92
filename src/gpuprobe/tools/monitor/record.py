"""``gpuprobe.record()``: record the machine around a block of Python or a notebook cell.

    import gpuprobe
    with gpuprobe.record(out="runs/epoch1") as rec:
        train_one_epoch()
    rec.plot()          # a matplotlib Figure: shows inline in Jupyter
    rec.plot("run.png") # written to a file (.png, .svg, .pdf, .jpg), its path returned
    rec.findings        # the judged findings, worst first
    rec.report()        # runs/epoch1/report.html

The watched process tree is this Python process and its children (DataLoader workers included);
the sampler's own thread is left out of the "busiest thread". Times are seconds.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuprobe.core import render
from gpuprobe.core.findings import Finding, status_counts
from gpuprobe.tools.monitor.sampler import DEFAULT_HZ, NvmlFactory, Sampler
from gpuprobe.tools.monitor.timeline import Timeline, TimelineWriter, read_timeline

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from gpuprobe.tools.monitor.summary import RunSummary

__all__ = ["Recording", "record"]


class Recording:
    """A recording in progress or done: where it is on disk, and its summary once done."""

    def __init__(self, out: Path, sampler: Sampler) -> None:
        self.out = out
        self.timeline_path = out / "timeline.jsonl"
        self._sampler = sampler
        self._timeline: Timeline | None = None
        self._summary: RunSummary | None = None
        self.done = False

    @property
    def timeline(self) -> Timeline:
        """The timeline read back from disk (so far, while still recording)."""
        if self._timeline is not None and self.done:
            return self._timeline
        tl = read_timeline(self.timeline_path)
        if self.done:  # final: read once
            self._timeline = tl
        return tl

    @property
    def summary(self) -> RunSummary:
        """Numbers and findings (see :func:`gpuprobe.tools.monitor.judge.summarize`)."""
        from gpuprobe.tools.monitor.judge import summarize

        if self._summary is not None and self.done:
            return self._summary
        summary = summarize(self.timeline)
        if self.done:
            self._summary = summary
        return summary

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The findings, worst first."""
        return self.summary.findings

    def plot(
        self, path: str | Path | None = None, *, panels: tuple[str, ...] | None = None
    ) -> Figure | Path:
        """The charts as a matplotlib Figure (Jupyter shows it inline); with ``path``, written
        there in the format its suffix names (.png, .svg, .pdf, .jpg) and the path returned.
        ``panels`` picks charts by name (default: those with data)."""
        return render.plot(self, path, panels=panels)

    def report(self, path: str | Path | None = None) -> Path:
        """Write the HTML report (default ``OUT/report.html``) and return its path."""
        p = Path(path) if path else self.out / "report.html"
        return render.report(self, p)

    def __repr__(self) -> str:
        state = "done" if self.done else "recording"
        n = self._sampler.samples
        if not self.done:
            return f"<Recording {state}: {n} samples in {self.out}>"
        s = self.summary
        return (
            f"<Recording {state}: {s.duration_s:.1f} s, {n} samples in {self.out}; "
            f"findings: {status_counts(s.findings)}>"
        )

    def __str__(self) -> str:
        if not self.done:
            return repr(self)
        return render.text(self)

    def _repr_html_(self) -> str:
        """The summary and findings; the charts are ``rec.plot()``."""
        if not self.done:
            return f"<pre>{escape(repr(self))}</pre>"
        return render.html(self)


RECORDING_HTML_FOOTER = (
    "<p><small>charts: <code>rec.plot()</code>; the HTML report: "
    "<code>rec.report()</code></small></p>"
)


@contextmanager
def record(
    out: str | Path | None = None,
    *,
    hz: float = DEFAULT_HZ,
    pid: int | None = None,
    pcie_throughput: bool = False,
    nvml: NvmlFactory | None = None,
) -> Iterator[Recording]:
    """Record every GPU, the host and process ``pid`` (default: this one) with its children
    while the block runs. ``out`` is a new or empty directory (default: a new temporary one)."""
    kwargs: dict[str, Any] = {} if nvml is None else {"nvml": nvml}
    # the sampler first: a rate it refuses leaves no folder behind
    sampler = Sampler(hz=hz, pid=None, pcie_throughput=pcie_throughput, **kwargs)
    out_dir = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="gpuprobe-rec-"))
    writer = TimelineWriter.create(out_dir)
    watched = os.getpid() if pid is None else pid
    rec = Recording(out_dir, sampler)
    error: BaseException | None = None
    try:
        sampler.open()
        sampler.watch(watched)
        start = time.time()
        writer.write_header(sampler.header(started=start, command=None, pid=watched))
        sampler.start(writer.write_sample)
        try:
            yield rec
        except BaseException as exc:
            error = exc
            raise
        finally:
            sampler.stop(final_sink=writer.write_sample)
            writer.write_end(
                exit_code=None,
                error=None if error is None else f"{type(error).__name__}: {error}"[:500],
                duration_s=round(time.time() - start, 4),
                **sampler.end_fields(),
            )
    finally:
        sampler.close()
        writer.close()
        rec.done = True
