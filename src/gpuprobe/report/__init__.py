"""Show results: the top layer, and the only one that renders.

- the terminal through rich: :mod:`~gpuprobe.report.terminal` (inventory, doctor),
  :mod:`~gpuprobe.report.bench_table`, :mod:`~gpuprobe.report.run_terminal` (a recording),
  :mod:`~gpuprobe.report.trace_text` and :mod:`~gpuprobe.report.trace_ranks` (a diagnosis),
  :mod:`~gpuprobe.report.top` (``gpuprobe top``), with :mod:`~gpuprobe.report.fit` (columns that
  fit the terminal) and :mod:`~gpuprobe.report.progress` (the one progress line);
- notebooks: :mod:`~gpuprobe.report.reprs` and :mod:`~gpuprobe.report.notebook` (HTML tables);
- charts through matplotlib: :mod:`~gpuprobe.report.plots`, :mod:`~gpuprobe.report.bench_plots`,
  :mod:`~gpuprobe.report.chart`;
- self-contained HTML pages: :mod:`~gpuprobe.report.html` (a recording),
  :mod:`~gpuprobe.report.trace_html` (a trace's timeline).

How a status looks is :mod:`~gpuprobe.report.style`; numbers are formatted by
:mod:`gpuprobe.units`. Lower layers reach this package only from two-line lazy delegates
(``__str__``, ``_repr_html_``, ``plot()``).
"""

from __future__ import annotations

__all__: list[str] = []
