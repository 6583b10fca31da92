"""The findings of ``gpuprobe pack`` (:mod:`gpuprobe.tools.monitor.pack`): failed copies,
unmatched ``--rate`` and processes left running per level, the N to run, other processes' load on the cores, and what the
machine offers for sharing a GPU (MIG, MPS), or that it has none.

Each rule judges a whole :class:`~gpuprobe.tools.monitor.pack.PackReport`; :data:`RULES` lists
them in the order their findings are shown.
"""

from __future__ import annotations

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import Rule, apply_rules, rule
from gpuprobe.core.units import count, speed_change
from gpuprobe.platform.hardware.load import host_busy_finding
from gpuprobe.tools.monitor.pack_model import (
    GPU_LIGHT_UTIL_PERCENT,
    PACK_MIN_GAIN,
    PackLevel,
    PackReport,
    core_capacity,
)

__all__ = [
    "GROUP",
    "RULES",
    "host_busy",
    "judge",
    "leftovers",
    "level_failures",
    "mig",
    "mps",
    "no_gpu",
    "recommendation",
]

GROUP = "pack"


def _change(ratio: float) -> str:
    """1.12 -> 'add 12 %', 0.97 -> 'lose 3 %', 0.999 -> 'add nothing' (never "-0 %")."""
    pct = round(100 * (ratio - 1))
    if pct == 0:
        return "add nothing"
    return f"add {pct} %" if pct > 0 else f"lose {-pct} %"


@rule("pack-copy-failed", "pack-no-rate")
def level_failures(r: PackReport) -> list[Finding]:
    """``pack-copy-failed`` (a copy exited non-zero) or ``pack-no-rate`` (``--rate`` matched
    nothing), level by level."""
    out: list[Finding] = []
    for lv in r.levels:
        if lv.failed:
            bad = next(c for c in lv.copies if c.exit_code != 0)
            out.append(
                Finding(
                    id="pack-copy-failed",
                    status=Status.FAIL,
                    title=f"{lv.failed} of {lv.n} copies failed at N={lv.n} "
                    f"(exit {bad.exit_code}: {bad.error})",
                    evidence=(Evidence("n", lv.n), Evidence("failed", lv.failed)),
                    fix="run one copy by hand and fix its error; at larger N it may be out of "
                    "memory (each copy needs its own)",
                    group=GROUP,
                    subject=f"n={lv.n}",
                )
            )
        elif lv.throughput is None:
            out.append(
                Finding(
                    id="pack-no-rate",
                    status=Status.WARN,
                    title=f"--rate {r.rate_regex!r} matched nothing in some copies' output at N={lv.n}",
                    evidence=(Evidence("n", lv.n),),
                    fix="check the pattern against the command's output; its first group must be "
                    "a number, e.g. --rate '([0-9.]+) samples/s'",
                    group=GROUP,
                    subject=f"n={lv.n}",
                )
            )
    return out


def _recommended(r: PackReport) -> PackLevel | None:
    """The recommended level, when it has a throughput."""
    if r.recommended is None:
        return None
    rec = {lv.n: lv for lv in r.levels}.get(r.recommended)
    return rec if rec is not None and rec.throughput is not None else None


def _has_recommendation(r: PackReport) -> bool:
    return _recommended(r) is not None


@rule("pack-recommend", applies=_has_recommendation)
def recommendation(r: PackReport) -> list[Finding]:
    """``pack-recommend``: the N to run, its total throughput and each copy's slowdown, and what
    the next level would add (or why the cores make its gain unreliable)."""
    rec = _recommended(r)
    if rec is None or rec.throughput is None:
        return []
    first = r.levels[0]
    gain = rec.throughput / first.throughput if first.throughput else None
    nxt = next((lv for lv in r.levels if lv.n > rec.n and lv.throughput), None)
    beyond = (
        f"; {nxt.n} copies {_change(nxt.throughput / rec.throughput)}"
        if nxt is not None and nxt.throughput is not None
        else ""
    )
    each = f", each copy {speed_change(1 / rec.slowdown)}" if rec.slowdown else ""
    cap = core_capacity(r.levels, r.cores)
    if (
        nxt is not None
        and nxt.throughput is not None
        and nxt.throughput > rec.throughput
        and cap is not None
        and nxt.n > cap
    ):
        beyond += (
            f", but {nxt.n} copies need more than the {r.cores} cores (one copy alone used "
            f"{r.levels[0].cpu_percent or 0:.0f} % of a core): past that the copies only "
            "time-share the cores, and what they seem to gain comes from gaps (start-up, "
            "other processes' idle time) that a busy machine will not leave"
        )
    return [
        Finding(
            id="pack-recommend",
            status=Status.OK,
            title=(
                f"run one copy at a time: {count(rec.throughput)} {r.unit}{beyond}"
                if rec.n == 1
                else f"run {rec.n} at once: {count(rec.throughput)} {r.unit} in total, "
                f"{gain:.2f}x N={first.n}{each}{beyond}"
            )
            if gain is not None
            else f"run {rec.n} at once",
            evidence=(
                Evidence("recommended", rec.n),
                Evidence("throughput", round(rec.throughput, 3), r.unit),
                Evidence("slowdown", None if rec.slowdown is None else round(rec.slowdown, 3), "x"),
                Evidence("min_gain", round(100 * PACK_MIN_GAIN), "%"),
                Evidence("cores", r.cores),
                Evidence("core_capacity", cap),
            ),
            fix="run one copy at a time: more copies did not raise the total"
            if rec.n == 1
            else f"run {rec.n} copies at a time (e.g. xargs -P {rec.n}, or a job array "
            f"{rec.n} wide)",
            group=GROUP,
        )
    ]


def _others_measured(r: PackReport) -> bool:
    return any(lv.others_cores is not None for lv in r.levels)


@rule("pack-host-busy", applies=_others_measured)
def host_busy(r: PackReport) -> list[Finding]:
    """``pack-host-busy``: other processes kept the cores busy in the level where they took the
    most."""
    busiest = max(
        (lv for lv in r.levels if lv.others_cores is not None),
        key=lambda lv: lv.others_cores or 0.0,
        default=None,
    )
    if busiest is None:
        return []
    load = r.load_average[0] if r.load_average else None
    busy = host_busy_finding(
        "pack-host-busy",
        f"N={busiest.n}",
        busiest.others_cores,
        r.cores,
        effect="the copies competed with them for the cores, so the slowdowns, the CPU a "
        "copy seems to need and the N recommended reflect that load, not the job alone",
        fix="re-run 'gpuprobe pack' when the machine is idle (see 'gpuprobe top'), or plan "
        "for the load it will have when the copies run",
        group=GROUP,
        subject=f"n={busiest.n}",
        extra=(Evidence("load_average_1min", load),),
    )
    return [] if busy is None else [busy]


def _cpu_only(r: PackReport) -> bool:
    return r.sharing.gpus == 0


def _has_gpu(r: PackReport) -> bool:
    return r.sharing.gpus != 0


@rule("pack-cpu-only", applies=_cpu_only)
def no_gpu(r: PackReport) -> list[Finding]:
    """``pack-cpu-only``: no GPU here, so the copies share the CPU cores only."""
    s = r.sharing
    return [
        Finding(
            id="pack-cpu-only",
            status=Status.INFO,
            title=f"no GPU here: the copies share {r.cores} CPU cores; MIG and MPS do not apply",
            evidence=(Evidence("cores", r.cores), Evidence("gpus", 0)),
            fix="",
            group=GROUP,
            details=(s.driver_note,) if s.driver_note else (),
        )
    ]


@rule("pack-mig", applies=_has_gpu)
def mig(r: PackReport) -> list[Finding]:
    """``pack-mig``: MIG on, available (off), or not available on this GPU."""
    s = r.sharing
    if s.mig_enabled:
        mig_title = (
            f"MIG is on for GPU {', '.join(map(str, s.mig_enabled))} "
            f"({s.mig_instances} instances): give each copy its own instance "
            "(CUDA_VISIBLE_DEVICES=MIG-<uuid>)"
        )
        mig_fix = "nvidia-smi -L lists the MIG-<uuid> of each instance"
    elif s.mig_capable:
        mig_title = (
            f"GPU {', '.join(map(str, s.mig_capable))} supports MIG (off): it splits the card into "
            "isolated slices with their own memory and bandwidth; it helps when copies must not "
            "disturb each other or each needs a fixed share, not for raw throughput"
        )
        mig_fix = "sudo nvidia-smi -i 0 -mig 1 && sudo nvidia-smi mig -cgi 19,19 -C  (idle card)"
    else:
        mig_title = "MIG is not available on this GPU (A100, A30, H100, H200 and newer have it)"
        mig_fix = ""
    return [
        Finding(
            id="pack-mig",
            status=Status.INFO,
            title=mig_title,
            evidence=(
                Evidence("mig_capable", len(s.mig_capable)),
                Evidence("mig_enabled", len(s.mig_enabled)),
            ),
            fix=mig_fix,
            group=GROUP,
        )
    ]


@rule("pack-mps", applies=_has_gpu)
def mps(r: PackReport) -> list[Finding]:
    """``pack-mps``: whether MPS runs, and whether it would help (one copy keeps the GPU less than
    :data:`~gpuprobe.tools.monitor.pack.GPU_LIGHT_UTIL_PERCENT` busy)."""
    s = r.sharing
    one = r.levels[0].gpu_util_percent if r.levels else None
    mps_helps = one is not None and one < GPU_LIGHT_UTIL_PERCENT
    state = (
        "running"
        if s.mps_running
        else ("installed, not running" if s.mps_control else "not installed")
    )
    return [
        Finding(
            id="pack-mps",
            status=Status.INFO,
            title=f"MPS is {state}"
            + (
                f"; one copy keeps the GPU {one:.0f} % busy, so MPS would let the copies' "
                "kernels run at the same time instead of taking turns"
                if mps_helps and one is not None
                else "; it helps when each copy leaves the GPU mostly idle "
                f"(< {GPU_LIGHT_UTIL_PERCENT:.0f} % utilization)"
            ),
            evidence=(
                Evidence("gpu_util_one_copy", one, "%"),
                Evidence("light_threshold", GPU_LIGHT_UTIL_PERCENT, "%"),
                Evidence("mps_running", s.mps_running),
            ),
            fix="nvidia-cuda-mps-control -d   (start the daemon; 'echo quit | "
            "nvidia-cuda-mps-control' stops it)"
            if mps_helps and not s.mps_running
            else "",
            group=GROUP,
        )
    ]


@rule("pack-leftover-processes")
def leftovers(r: PackReport) -> list[Finding]:
    """``pack-leftover-processes``: a level's copies left processes running when they exited;
    a warning when they ran on (beside the next levels, whose figures they skew), info when
    ``--kill-leftovers`` ended them."""
    out: list[Finding] = []
    for lv in r.levels:
        if not lv.leftovers:
            continue
        n = len(lv.leftovers)
        if lv.leftovers_ended:
            what = "gpuprobe ended them (--kill-leftovers)"
        elif lv is r.levels[-1]:
            what = "they still run"
        else:
            what = "they ran beside the levels after it, and still run"
        out.append(
            Finding(
                id="pack-leftover-processes",
                status=Status.INFO if lv.leftovers_ended else Status.WARN,
                title=f"The copies at N={lv.n} left {n} process(es) running when they exited; "
                + what,
                evidence=(Evidence("n", lv.n), Evidence("leftovers", n)),
                fix=""
                if lv.leftovers_ended
                else "end them (kill each pid listed), run with --kill-leftovers, or make the "
                "command `wait` for what it starts",
                group=GROUP,
                subject=f"n={lv.n}",
                details=lv.leftovers,
            )
        )
    return out


RULES: tuple[Rule, ...] = (
    level_failures,
    leftovers,
    recommendation,
    host_busy,
    no_gpu,
    mig,
    mps,
)


def judge(r: PackReport) -> list[Finding]:
    """Every pack rule's findings for ``r``, in rule order (the report's ``findings``)."""
    return apply_rules(RULES, r)
