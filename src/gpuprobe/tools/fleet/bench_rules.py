"""``gpuprobe bench --cluster`` judged: every node's figures set beside those of its peers (the
same workload, case, framework and size on the same model of CPU or GPU), and the outliers named
by a robust rule: more than :data:`OUTLIER_MADS` median absolute deviations from the median of its
peers *and* more than :data:`OUTLIER_MIN_GAP` away from it. Both, because either alone misleads:
twins that agree to 0.1 % make a MAD so small that 2 % of noise would be "an outlier", and a
spread fleet makes 10 % ordinary."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import Rule, apply_rules, rule
from gpuprobe.tools.fleet.model import BenchPoint, Figure, NodeBench, nodes_and_workers
from gpuprobe.tools.fleet.rules import missing_nodes, node_failures

__all__ = [
    "BENCH_RULES",
    "MIN_PEERS",
    "OUTLIER_MADS",
    "OUTLIER_MIN_GAP",
    "bench_alike",
    "compare",
    "judge_bench",
    "outliers",
]

# A figure further than this many median absolute deviations (raw MAD, not scaled by 1.4826)
# from the median of its peers may be an outlier (issue 29; Leys et al. 2013, "Detecting
# outliers: do not use standard deviation around the mean, use absolute deviation around the
# median", call 3 very conservative).
OUTLIER_MADS = 3.0
# ...and only when it is also this far from that median, as a fraction of it: a quick bench run
# twice on one idle node differs by less (bench's own spread limit for a trustworthy figure is
# 0.1, tools/bench/rules.py).
OUTLIER_MIN_GAP = 0.10
# A figure is judged against at least this many peers: with one, which of the two is odd cannot
# be told.
MIN_PEERS = 2


def outliers(figures: Mapping[str, float]) -> dict[str, float]:
    """The names whose figure is an outlier among ``figures`` (name -> value), each with its
    ratio to the median of its peers (the others): more than :data:`OUTLIER_MADS` MADs of the
    peers from their median and more than :data:`OUTLIER_MIN_GAP` of it away, either way. A
    pure function; no name is judged with fewer than :data:`MIN_PEERS` peers."""
    out: dict[str, float] = {}
    for name, value in figures.items():
        peers = [v for n, v in figures.items() if n != name]
        if len(peers) < MIN_PEERS:
            continue
        med = statistics.median(peers)
        if med == 0:
            continue
        mad = statistics.median(abs(v - med) for v in peers)
        gap = abs(value - med)
        if gap > OUTLIER_MADS * mad and gap > OUTLIER_MIN_GAP * abs(med):
            out[name] = value / med
    return out


def _vs_peers(figures: Mapping[str, float], name: str) -> float | None:
    peers = [v for n, v in figures.items() if n != name]
    if len(peers) < MIN_PEERS or not (med := statistics.median(peers)):
        return None
    return figures[name] / med


def compare(nodes: Iterable[NodeBench]) -> list[BenchPoint]:
    """Every measured figure of every node that reported, grouped by what it measured and on
    which model of device, each figure with its ratio to its peers' median and the outliers
    marked. Points in the order the nodes measured them."""
    points: dict[tuple[object, ...], BenchPoint] = {}
    values: dict[tuple[object, ...], dict[str, tuple[float, Figure]]] = {}
    for n in nodes:
        if n.status != "ok" or n.report is None:
            continue
        for r in n.report.results:
            head = r.headline()
            if head is None:
                continue
            metric, value, unit, higher = head
            kind = "cpu" if r.device == "cpu" else "gpu"
            model = n.devices.get(r.device, "unknown")
            key = (r.workload, r.case, r.framework, kind, model, r.size, metric)
            points.setdefault(key, BenchPoint(
                workload=r.workload, case=r.case, framework=r.framework, kind=kind, model=model,
                size=r.size, size_unit=r.size_unit, metric=metric, unit=unit,
                higher_is_better=higher,
            ))  # fmt: skip
            who = n.name if kind == "cpu" else f"{n.name} {r.device}"
            pct = r.values.get("pct_peak")
            values.setdefault(key, {})[who] = (value, Figure(
                who=who, node=n.name, device=r.device, value=value,
                pct_peak=float(pct) if pct is not None else None,
            ))  # fmt: skip
    out = []
    for k, point in points.items():
        figs = {who: v for who, (v, _) in values[k].items()}
        odd = outliers(figs)
        figures = tuple(
            replace(f, vs_peers=_vs_peers(figs, who), outlier=who in odd)
            for who, (_, f) in values[k].items()
        )
        out.append(replace(point, figures=figures, median=statistics.median(figs.values())))
    return out


def _slower(p: BenchPoint, f: Figure) -> bool:
    ratio = f.vs_peers if f.vs_peers is not None else 1.0
    return ratio < 1.0 if p.higher_is_better else ratio > 1.0


@rule("fleet-bench-outlier")
def bench_outliers(nodes: Sequence[NodeBench], points: Sequence[BenchPoint]) -> list[Finding]:
    """Each device whose figures stand out from its peers', slower (warn) or faster (info: the
    peers may be the ones held down), with every such figure and its ratio to the peers."""
    by_who: dict[tuple[str, bool], list[tuple[BenchPoint, Figure]]] = {}
    for p in points:
        for f in p.figures:
            if f.outlier:
                by_who.setdefault((f.who, _slower(p, f)), []).append((p, f))
    out = []
    for (who, slower), items in by_who.items():
        compared = sum(1 for p in points for f in p.figures if f.who == who and f.vs_peers)
        worst_p, worst_f = max(items, key=lambda pf: abs(1 - (pf[1].vs_peers or 1)))
        ratio = worst_f.vs_peers or 1.0
        model = worst_p.model
        word = "slower" if slower else "faster"
        node = worst_f.node
        threads = next((n.blas_threads for n in nodes if n.name == node), None)
        out.append(
            Finding(
                id="fleet-bench-outlier",
                status=Status.WARN if slower else Status.INFO,
                title=f"{who} is {word} than its peers ({model}) on {len(items)} of "
                f"{compared} figures; {worst_p.label}: {ratio:.2f}x the peers' median",
                evidence=(
                    Evidence("outlying_figures", len(items)),
                    Evidence("compared_figures", compared),
                    Evidence("worst_vs_peers", round(ratio, 3), "x"),
                )
                + ((Evidence("blas_threads", threads),) if threads is not None else ()),
                fix=(
                    f"look at {node} while it runs (gpuprobe top there): another job, clocks "
                    "or power held down, a different BIOS or thread setting; re-run 'gpuprobe "
                    "bench --cluster ... --one-at-a-time' if the hosts share a network or a switch"
                    if slower
                    else f"{who} runs faster than the rest: check whether its peers are held "
                    "down or share their machine with other jobs"
                ),
                group="fleet",
                subject=who,
                details=tuple(
                    f"{p.label} ({p.kind} {p.model}): {f.value:.4g} {p.unit} vs median "
                    f"{(f.value / (f.vs_peers or 1)):.4g} ({(f.vs_peers or 1):.2f}x)"
                    for p, f in items
                ),
            )
        )
    return out


@rule("fleet-bench-no-peers")
def no_peers(nodes: Sequence[NodeBench], points: Sequence[BenchPoint]) -> list[Finding]:
    """Device models with too few nodes to name an outlier among them."""
    alone: dict[str, set[str]] = {}
    for p in points:
        if len(p.figures) < MIN_PEERS + 1:
            alone.setdefault(f"{p.kind} {p.model}", set()).update(f.who for f in p.figures)
    out = []
    for model, who in alone.items():
        title = f"{model}: {len(who)} device(s) ({', '.join(sorted(who))}); an outlier needs "
        title += f"{MIN_PEERS} peers of the same model"
        evidence = (Evidence("devices", len(who)), Evidence("min_peers", MIN_PEERS))
        out.append(Finding(id="fleet-bench-no-peers", status=Status.INFO, title=title,
                           evidence=evidence, group="fleet"))  # fmt: skip
    return out


BENCH_RULES: tuple[Rule, ...] = (missing_nodes, node_failures, bench_outliers, no_peers)


@rule("fleet-bench-alike")
def bench_alike(nodes: Sequence[NodeBench], points: Sequence[BenchPoint]) -> list[Finding]:
    """The fleet bench's OK: asked only when no rule above found anything."""
    figures = sum(len(p.figures) for p in points)
    return [
        Finding(
            id="fleet-bench-alike",
            status=Status.OK,
            title=f"{len(points)} point(s) on {nodes_and_workers(nodes)}: every figure within "
            f"{OUTLIER_MIN_GAP:.0%} or {OUTLIER_MADS:g} MADs of its peers' median",
            evidence=(Evidence("points", len(points)), Evidence("figures", figures)),
            group="fleet",
        )
    ]


def judge_bench(nodes: Iterable[NodeBench], points: Sequence[BenchPoint]) -> list[Finding]:
    """Every rule over the nodes and their points; one OK finding when nothing stands out."""
    nodes = list(nodes)
    return apply_rules(BENCH_RULES, nodes, points) or bench_alike(nodes, points)
