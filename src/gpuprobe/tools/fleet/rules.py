"""The checks that only make sense across nodes: a node that differs from the majority (versions,
GPUs, the workers' threads), a GPU whose PCIe link, power limit or clocks are below its twins',
memory errors where the peers have none, clocks held down by heat or the board, a node that fails
its own doctor, and a worker that reported nothing. Each returns a list of findings."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import Rule, apply_rules, rule
from gpuprobe.platform.hardware.types import Gpu
from gpuprobe.tools.fleet.config import CONFIG_KEYS, FRAMEWORKS, HARDWARE_KEYS
from gpuprobe.tools.fleet.model import NodeBench, NodeResult, nodes_and_workers

__all__ = ["RULES", "alike", "judge_fleet"]

# A GPU's power limit or maximum SM clock this far under the best of its twins (same model) is
# set lower on purpose or by the board: nvidia-smi -pl / -lgc, or a power brake (10 %: the spread
# of default limits between board SKUs of one model is under it).
LIMIT_BELOW_PEERS = 0.10
# Clock event reasons that mean the card is held down by heat, the board or its power supply,
# not by software settings or idleness (nvml.h nvmlClocksEventReason*).
HELD_DOWN_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
                     "sw_thermal_slowdown")  # fmt: skip

_FIX = {
    "driver": "install driver {want} on {node} (the same as the other nodes) and reboot it",
    "cuda driver": "install the driver that supports CUDA {want} on {node}",
    "python": "use Python {want} on {node}'s workers, as the others do",
    "numpy": "pip install numpy=={want} on {node}",
    "worker threads": "start {node}'s workers with --nthreads {want}, like the others",
    "gpuprobe": "pip install gpuprobe=={want} on {node}",
    "gpus": "check {node}'s GPUs (nvidia-smi -L): a card missing or of another model",
    "mig": "set MIG {want} on {node} (nvidia-smi -mig), like the others",
}


def _ready(nodes: Sequence[NodeResult]) -> list[NodeResult]:
    return [n for n in nodes if n.status == "ok" and n.report is not None]


def _fix(key: str, want: str, node: str, mine: str = "") -> str:
    if key in FRAMEWORKS:
        version = want.split(" ")[0]
        if mine.split(" ")[0].rstrip(":") == version:  # the same build, but it fails there
            return f"{key} does not import on {node}: see its fleet-node-fails finding"
        if version == "not":
            return f"pip uninstall {key} on {node}, or install it on the others"
        return f"install the same {key} build on {node}: pip install {key}=={version}"
    return _FIX.get(key, "make {node}'s {key} match the others ({want})").format(
        want=want, node=node, key=key
    )


@rule("fleet-worker-lost", "fleet-no-gpuprobe", "fleet-error")
def missing_nodes(nodes: Sequence[NodeResult | NodeBench], *_: object) -> list[Finding]:
    """Workers that gave no report: lost (died, timed out), without gpuprobe, or failing (for
    doctor --cluster and bench --cluster alike; bench's rules pass its points too)."""
    out = []
    for status, title, fix in (
        ("lost", "{n} worker(s) lost before reporting: {who}",
         "see the worker's log (dask worker … output): it died or did not answer in time; the "
         "other nodes' results are kept"),
        ("no-gpuprobe", "gpuprobe is not installed on {n} worker(s): {who}",
         "pip install gpuprobe in the workers' environment (the same as the client's)"),
        ("error", "gpuprobe failed on {n} worker(s): {who}",
         "run the same command on that machine to see the error ('gpuprobe doctor', "
         "'gpuprobe bench --quick')"),
    ):  # fmt: skip
        bad = [n for n in nodes if n.status == status]
        if not bad:
            continue
        who = "; ".join(f"{n.name}: {n.error}" if n.error else n.name for n in bad)
        workers = sum(len(n.workers) for n in bad)
        out.append(
            Finding(
                id=(
                    "fleet-worker-lost"
                    if status == "lost"
                    else "fleet-no-gpuprobe"
                    if status == "no-gpuprobe"
                    else "fleet-error"
                ),
                status=Status.FAIL,
                title=title.format(n=workers, who=who),
                evidence=(Evidence("workers", workers),),
                fix=fix,
                group="fleet",
                details=tuple(f"{a}: {n.error or status}" for n in bad for a in n.workers),
            )
        )
    return out


@rule("fleet-versions-drift", "fleet-hardware-differs", "fleet-workers-differ", "fleet-no-majority")
def configuration(nodes: Sequence[NodeResult]) -> list[Finding]:
    """Each node that differs from the majority, by what differs; a fact on which no majority
    exists (two nodes, two drivers) is told once with every node's value."""
    ready = _ready(nodes)
    if len(ready) < 2:
        return []
    out: list[Finding] = []
    odd: dict[str, list[tuple[str, str, str]]] = {}  # node -> (key, its value, majority value)
    split: list[str] = []
    for key in CONFIG_KEYS:
        values = Counter(n.config.get(key, "?") for n in ready)
        if len(values) == 1:
            continue
        workers = Counter()  # type: Counter[str]
        for n in ready:
            workers[n.config.get(key, "?")] += len(n.workers)
        # the majority: more than half the nodes, or half of them with more than half the
        # workers (a host of two alike workers against its one odd worker)
        want, count = max(values.items(), key=lambda kv: (kv[1], workers[kv[0]]))
        total = sum(workers.values())
        if count * 2 > len(ready) or (count * 2 == len(ready) and workers[want] * 2 > total):
            for n in ready:
                if n.config.get(key, "?") != want:
                    odd.setdefault(n.name, []).append((key, n.config.get(key, "?"), want))
        else:
            split.append(
                f"{key}: " + "; ".join(f"{n.name} {n.config.get(key, '?')}" for n in ready)
            )
    for name, diffs in odd.items():
        hardware = [d for d in diffs if d[0] in HARDWARE_KEYS]
        threads = [d for d in diffs if d[0] == "worker threads"]
        software = [d for d in diffs if d not in hardware and d not in threads]
        for kind, items, status in (
            ("versions", software, Status.WARN),
            ("hardware", hardware, Status.WARN),
            ("threads", threads, Status.INFO),
        ):
            if not items:
                continue
            what = "; ".join(f"{k} {mine} vs {want}" for k, mine, want in items)
            out.append(
                Finding(
                    id=(
                        "fleet-versions-drift"
                        if kind == "versions"
                        else "fleet-hardware-differs"
                        if kind == "hardware"
                        else "fleet-workers-differ"
                    ),
                    status=status,
                    title=f"{name} differs from the other nodes: {what}",
                    evidence=tuple(Evidence(k, mine) for k, mine, _ in items),
                    fix="; ".join(_fix(k, want, name, mine) for k, mine, want in items),
                    group="fleet",
                    subject=name,
                )
            )
    if split:
        out.append(
            Finding(
                id="fleet-no-majority",
                status=Status.WARN,
                title=f"the nodes disagree with no majority on {len(split)} fact(s): "
                + ", ".join(s.split(":")[0] for s in split),
                evidence=(Evidence("nodes", len(ready)),),
                fix="pick one version of each and install it on every node",
                group="fleet",
                details=tuple(split),
            )
        )
    return out


def _twins(nodes: Sequence[NodeResult]) -> dict[str, list[tuple[str, Gpu]]]:
    """Every GPU of every reporting node, by model."""
    out: dict[str, list[tuple[str, Gpu]]] = {}
    for n in _ready(nodes):
        assert n.report is not None
        for g in n.report.inventory.gpus:
            out.setdefault(g.name or "unknown", []).append((n.name, g))
    return out


def _below_peers(
    nodes: Sequence[NodeResult],
    fid: str,
    what: str,
    value: Callable[[Gpu], float | None],
    unit: str,
    fix: str,
    tolerance: float,
) -> list[Finding]:
    out = []
    for model, gpus in _twins(nodes).items():
        values = [v for _, g in gpus if (v := value(g)) is not None]
        if len({name for name, _ in gpus}) < 2 or not values:
            continue
        best = max(values)
        for name, g in gpus:
            v = value(g)
            if v is not None and v < best * (1 - tolerance):
                out.append(
                    Finding(
                        id=fid,
                        status=Status.WARN,
                        title=f"{name} {g.label}: {what} {v:g} {unit} where its twins "
                        f"({model}) have {best:g} {unit}",
                        evidence=(
                            Evidence(what.replace(" ", "_"), v, unit),
                            Evidence("peers_best", best, unit),
                        ),
                        fix=fix.format(node=name, index=g.index),
                        group="fleet",
                        subject=name,
                    )
                )
    return out


@rule("fleet-pcie-below-peers")
def pcie(nodes: Sequence[NodeResult]) -> list[Finding]:
    """A GPU whose PCIe link is narrower, or can train to a lower generation, than its twins'.
    The current generation is left out: an idle card lowers it to save power."""
    fix = ("reseat {node}'s GPU {index} or move it to a x16 slot; check the BIOS's PCIe settings "
           "and riser cables (nvidia-smi -q -d PCIE)")  # fmt: skip
    return _below_peers(
        nodes, "fleet-pcie-below-peers", "PCIe width", lambda g: g.pcie.width_current, "lanes",
        fix, 0.0,
    ) + _below_peers(
        nodes, "fleet-pcie-below-peers", "PCIe generation", lambda g: g.pcie.gen_max, "(max)",
        fix, 0.0,
    )  # fmt: skip


@rule("fleet-limits-below-peers")
def limits(nodes: Sequence[NodeResult]) -> list[Finding]:
    """A GPU whose power limit or maximum SM clock is set below its twins'."""
    return _below_peers(
        nodes, "fleet-limits-below-peers", "power limit", lambda g: g.power_limit_w, "W",
        "restore the default: sudo nvidia-smi -i {index} -pl <its default> on {node} "
        "(nvidia-smi -q -d POWER shows it)", LIMIT_BELOW_PEERS,
    ) + _below_peers(
        nodes, "fleet-limits-below-peers", "max SM clock", lambda g: g.sm_clock_max_mhz, "MHz",
        "sudo nvidia-smi -i {index} -rgc on {node} (reset locked clocks)", LIMIT_BELOW_PEERS,
    )  # fmt: skip


def _errors(g: Gpu) -> dict[str, int]:
    counts = {
        "ecc_uncorrected_volatile": g.ecc_uncorrected_volatile or 0,
        "retired_pages": g.retired_pages or 0,
        "remapped_rows_uncorrectable": g.remapped_rows_uncorrectable or 0,
        "pending": int(bool(g.retired_pages_pending or g.remapped_rows_pending)),
    }
    return {k: v for k, v in counts.items() if v}


@rule("fleet-memory-errors")
def memory_errors(nodes: Sequence[NodeResult]) -> list[Finding]:
    """ECC errors, retired pages or remapped rows on a GPU whose twins have none."""
    out = []
    for _model, gpus in _twins(nodes).items():
        clean = [g for _, g in gpus if not _errors(g)]
        for name, g in gpus:
            errs = _errors(g)
            if not errs:
                continue
            peers = f"; {len(clean)} of its {len(gpus) - 1} twins have none" if clean else ""
            out.append(
                Finding(
                    id="fleet-memory-errors",
                    status=Status.FAIL if errs.get("pending") else Status.WARN,
                    title=f"{name} {g.label}: memory errors "
                    + ", ".join(f"{k}={v}" for k, v in errs.items())
                    + peers,
                    evidence=tuple(Evidence(k, v) for k, v in errs.items()),
                    fix=f"drain {name}, reset GPU {g.index} (nvidia-smi -r) to apply pending "
                    "retirements, and ask for an RMA if the count keeps growing "
                    "(nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER)",
                    group="fleet",
                    subject=name,
                )
            )
    return out


@rule("fleet-throttled")
def held_down(nodes: Sequence[NodeResult]) -> list[Finding]:
    """Clocks held down by heat, the board or a power brake when the node was read."""
    out = []
    for _model, gpus in _twins(nodes).items():
        for name, g in gpus:
            active = [r for r in g.clock_event_reasons or () if r in HELD_DOWN_REASONS]
            if active:
                out.append(
                    Finding(
                        id="fleet-throttled",
                        status=Status.WARN,
                        title=f"{name} {g.label}: clocks held down by {', '.join(active)}",
                        evidence=(
                            Evidence("reasons", ", ".join(active)),
                            Evidence("temperature", g.temperature_c, "°C"),
                        ),
                        fix=f"check {name}'s cooling and power cables (nvidia-smi -q -d "
                        "PERFORMANCE,TEMPERATURE); a card held down runs slower than its twins",
                        group="fleet",
                        subject=name,
                    )
                )
    return out


@rule("fleet-node-fails")
def node_failures(nodes: Sequence[NodeResult | NodeBench], *_: object) -> list[Finding]:
    """A node whose own doctor, or own bench, failed a check (a bench's wrong result or crashed
    framework)."""
    out = []
    for n in nodes:
        failed = [f for f in n.report.findings if f.failed] if n.report is not None else []
        if failed and n.status == "ok":
            out.append(
                Finding(
                    id="fleet-node-fails",
                    status=Status.FAIL,
                    title=f"{n.name} fails its own checks: "
                    + ", ".join(sorted({f.id for f in failed})),
                    evidence=(Evidence("failed_checks", len(failed)),),
                    fix=failed[0].fix or f"run 'gpuprobe doctor' on {n.name}",
                    group="fleet",
                    subject=n.name,
                    details=tuple(f"{f.id}: {f.title}" for f in failed),
                )
            )
    return out


RULES: tuple[Rule, ...] = (
    missing_nodes,
    node_failures,
    configuration,
    pcie,
    limits,
    memory_errors,
    held_down,
)


@rule("fleet-alike")
def alike(nodes: Sequence[NodeResult]) -> list[Finding]:
    """The fleet's OK: asked only when no other rule found anything (:func:`judge_fleet`)."""
    ready = _ready(nodes)
    return [
        Finding(
            id="fleet-alike",
            status=Status.OK,
            title=f"{nodes_and_workers(ready)}, one configuration, no node failing its checks",
            evidence=(
                Evidence("nodes", len(ready)),
                Evidence("workers", sum(len(n.workers) for n in ready)),
            ),
            group="fleet",
        )
    ]


def judge_fleet(nodes: Iterable[NodeResult]) -> list[Finding]:
    """Every rule over the nodes; one OK finding when nothing differs and nothing failed."""
    nodes = list(nodes)
    return apply_rules(RULES, nodes) or alike(nodes)
