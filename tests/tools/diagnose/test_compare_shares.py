"""``--compare`` flags share changes (Tensor Cores, precision, copy kinds, kernel families), calls
a duration that grows slower, names the biggest change of time in its headline and shows kernel
names whole: on synthetic traces with kernel names from the corpus, and on HTA's trace-diff pair
(real A100 and V100 traces, step 1012 each) against sums over the JSON."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

import gpuprobe.cli as cli
from _support import too_wide
from gpuprobe.core.findings import Status
from gpuprobe.tools.diagnose.compare import SHARE_CHANGE_PP
from gpuprobe.tools.diagnose.engine import compare
from gpuprobe.tools.diagnose.mix import precision_of_name
from gpuprobe.tools.diagnose.model import TIME_UNITS, MetricChange, ShareChange, TraceComparison
from gpuprobe.tools.diagnose.show.html import comparison_html
from gpuprobe.tools.diagnose.show.ranks import short_kernel_name
from gpuprobe.tools.diagnose.show.text import render_comparison_text
from gpuprobe.tools.diagnose.synthetic import KinetoBuilder

from .realdata import DIFF_CONTROL, DIFF_TEST, gpu_events, load

# Kernel names as they appear in the corpus (../shared/traces): CUTLASS TF32 Tensor-Core GEMMs
# and cuBLAS FP32 sgemm on an A100 (hta_trace_diff control), a cuDNN TF32 implicit-GEMM
# convolution (hta_critical_path alexnet), and cuBLAS FP32 sgemm on a V100 (hta_trace_diff test).
TC_GEMM = (
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>"
    "(cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4::Params)"
)
TC_CONV = (
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16"
    "_stage4_warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn"
)
A100_SGEMM = "ampere_sgemm_128x64_nn"
V100_SGEMM = "volta_sgemm_128x32_nt"
ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3>)"
)
DTOD = "Memcpy DtoD (Device -> Device)"


@pytest.fixture(autouse=True)
def _only_diagnose(monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", ("diagnose",))


def _gemm_trace(path: Path, kernels: list[tuple[str, float]], steps: int = 4) -> str:
    """Each step: the (kernel, µs) list, then 10 elementwise adds of 20 µs."""
    b = KinetoBuilder(compute_major=8)
    for n in range(steps):
        with b.step(n):
            for name, us in kernels:
                b.launch(name, kernel_us=us, op="aten::mm")
            for _ in range(10):
                b.launch(ADD, kernel_us=20.0, op="aten::add")
            b.sync()  # the step waits for its GPU work, so step time follows GPU time
        b.cpu(50.0)
    return b.write(str(path))


def _copy_trace(path: Path, copies: list[float], steps: int = 3) -> str:
    """Each step: device-to-device copies of these durations (µs), then 4 GEMMs of 500 µs."""
    b = KinetoBuilder()
    for n in range(steps):
        with b.step(n):
            for us in copies:
                b.memcpy("DtoD", nbytes=1 << 20, gpu_us=us, pinned=True, launch_us=4.0)
            for _ in range(4):
                b.launch(V100_SGEMM, kernel_us=500.0, op="aten::mm")
            b.sync()
        b.cpu(50.0)
    for ev in b.events:  # the builder names a copy's far side as host memory; DtoD is Device
        if ev.get("name", "").startswith("Memcpy DtoD"):
            ev["name"] = DTOD
    return b.write(str(path))


@pytest.fixture
def tc_pair(tmp_path) -> tuple[str, str]:
    """Before: 76.5 % of GEMM/conv time on TF32 Tensor Cores (CUTLASS GEMM + cuDNN xmma conv),
    23.5 % FP32 sgemm; after: every matmul an FP32 sgemm taking 2.4 times as long, as on the
    V100 of HTA's trace-diff pair (GEMM time 14.7 -> 35.9 ms per step)."""
    before = _gemm_trace(
        tmp_path / "tc.json.gz", [(TC_GEMM, 500.0), (TC_CONV, 265.0), (A100_SGEMM, 235.0)]
    )
    after = _gemm_trace(tmp_path / "fp32.json.gz", [(V100_SGEMM, 2400.0)])
    return before, after


@pytest.fixture
def dtod_pair(tmp_path) -> tuple[str, str]:
    """The DtoD copies of HTA's trace-diff pair, step 1012: 3 copies of 455 µs in all, then 768
    of 17,076 µs in all (each shorter, many more)."""
    before = _copy_trace(tmp_path / "few.json.gz", [152.0, 152.0, 151.0])
    after = _copy_trace(tmp_path / "many.json.gz", [22.0] * 767 + [202.0])
    return before, after


def _squash(text: str) -> str:
    """The text without whitespace, so a name wrapped over lines reads as one."""
    return re.sub(r"\s+", "", text)


# -- Tensor Cores and precision ---------------------------------------------------------------


def test_tensor_core_share_falling_to_zero_is_flagged_worse(tc_pair):
    c = compare(*tc_pair)
    tc = c.share("Tensor Cores")
    assert tc is not None and tc.of == "GEMM/conv"
    assert tc.before == pytest.approx(765 / 1000)
    assert tc.after == 0.0
    assert tc.change_pp == pytest.approx(-76.5)
    assert tc.flagged and tc.verdict == "worse" and tc.worse is True
    assert tc.before_us == pytest.approx(765.0) and tc.after_us == 0.0
    # the precision mix says which: TF32 gone, FP32 everywhere
    tf32, fp32 = c.share("TF32", "precision"), c.share("FP32", "precision")
    assert tf32 is not None and fp32 is not None
    assert (tf32.before, tf32.after) == (pytest.approx(0.765), 0.0)
    assert (fp32.before, fp32.after) == (pytest.approx(0.235), 1.0)
    assert tf32.verdict == fp32.verdict == "worse" and tf32.flagged and fp32.flagged
    assert c.flagged()[0] is tc  # Tensor Cores first
    # the no-tensor-cores rule sees it too (the after trace is 96 % FP32 GEMMs on compute 8.0)
    nt = next(f for f in c.findings if f.id == "no-tensor-cores")
    assert (nt.before, nt.after) == (Status.OK, Status.WARN)
    text = render_comparison_text(c)
    assert re.search(r"Tensor Cores of GEMM/conv\s+76\.5 %\s+0\.0 %\s+-76\.5 pp.*worse", text)
    assert "GEMM" in c.headline and "Tensor Cores 76.5 % → 0.0 %" in c.headline


def test_the_fix_reads_the_other_way(tc_pair):
    c = compare(tc_pair[1], tc_pair[0])
    tc = c.share("Tensor Cores")
    assert tc is not None and tc.verdict == "better" and tc.worse is False
    step = c.metric("step time (median)")
    assert step is not None and step.verdict == "faster"


def test_precision_of_corpus_kernel_names():
    assert precision_of_name(TC_GEMM) == precision_of_name(TC_CONV) == "TF32"
    assert precision_of_name(A100_SGEMM) == precision_of_name(V100_SGEMM) == "FP32"
    bf16 = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"
    assert precision_of_name(bf16) == "BF16"
    assert precision_of_name("volta_h884gemm_64x64_ldg8_nn") == "FP16"
    assert precision_of_name("volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn") == "FP16"
    assert precision_of_name("sm80_xmma_gemm_i8i8_i8i32_f32_tn_n_tilesize128x128x64") == "INT8"
    assert precision_of_name("sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128") == "FP8"
    assert precision_of_name("volta_dgemm_128x64_nn") == "FP64"
    # cuDNN's own kernels by their first template type
    assert (
        precision_of_name("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>")
        == "FP32"
    )
    assert precision_of_name("nvjet_tst_128x64_64x4_1x2_h_bz_coopA_NNT") == "unknown"


# -- durations that grow are slower -----------------------------------------------------------


def test_dtod_copy_455_to_17076_us_is_slower(dtod_pair):
    c = compare(*dtod_pair)
    assert c.kernels is not None
    k = c.kernels.kernel(DTOD)
    assert k is not None
    assert (k.count_before, k.count_after) == (3, 768)
    assert (k.total_before_us, k.total_after_us) == (pytest.approx(455.0), pytest.approx(17076.0))
    assert k.mean_after_us < k.mean_before_us  # each copy got shorter ...
    assert k.status == "slower"  # ... but the step spends 16.6 ms more in them
    assert k.why == "more calls, shorter calls"
    dtod = c.share("DtoD copies", "copies")
    assert dtod is not None and dtod.flagged and dtod.verdict == "slower"
    assert (dtod.before_us, dtod.after_us) == (pytest.approx(455.0), pytest.approx(17076.0))
    text = render_comparison_text(c)
    line = next(i for i, x in enumerate(text.splitlines()) if x.strip() == DTOD)
    numbers = text.splitlines()[line - 1]
    assert numbers.startswith("slower") and "faster" not in numbers
    assert "+16.6 ms" in numbers and "0.5 → 17.1 ms" in numbers and "3 → 768 calls" in numbers
    assert "slower" in c.headline and DTOD in c.headline
    assert "455 µs → 17.1 ms, 3 → 768 per step" in c.headline


def test_every_time_that_grows_is_slower_never_faster(dtod_pair, tc_pair):
    for pair in (dtod_pair, tc_pair, tc_pair[::-1], dtod_pair[::-1]):
        c = compare(*pair)
        for m in c.metrics:
            if m.unit in TIME_UNITS and m.verdict:
                assert m.better == "lower", m.name
                assert m.verdict == ("slower" if (m.change or 0) > 0 else "faster"), m.name
        assert c.kernels is not None
        for k in c.kernels.changes:
            if k.status in ("slower", "faster"):
                assert (k.status == "slower") == (k.delta_us > 0), k.name
        for s in c.shares:
            if not s.better and s.verdict:
                assert (s.verdict == "slower") == (s.after_us > s.before_us), s.name


def test_metric_and_share_verdicts():
    grows = MetricChange("copy time", "µs", 455.0, 17076.0)
    assert (grows.verdict, grows.improved) == ("slower", False)
    assert MetricChange("busy", "%", 80.0, 90.0, better="higher").verdict == "better"
    assert MetricChange("x", "µs", 100.0, 101.0, tolerance=2.0).verdict == ""
    mix = ShareChange("kernel family", "GEMM", "GPU time", 0.2, 0.1, 100.0, 300.0, flagged=True)
    assert mix.verdict == "slower"  # a smaller share of a longer GPU time, but more time
    pageable = ShareChange(
        "copies", "pageable", "host-device copies", 0.1, 0.6, better="lower", flagged=True
    )
    assert pageable.verdict == "worse"
    assert ShareChange("copies", "pageable", "host-device copies", 0.1, 0.11).verdict == ""


# -- names whole, 80 columns, pipes, HTML -----------------------------------------------------


def test_kernel_names_longer_than_30_characters_are_never_cut(tc_pair, capsys, monkeypatch):
    c = compare(*tc_pair)
    text = render_comparison_text(c)
    assert too_wide(text) == []
    assert "…" not in text
    whole = json.dumps(c.to_dict())
    for name in (TC_GEMM, TC_CONV, V100_SGEMM):
        assert len(name) > 30 or name == V100_SGEMM
        # named as the kernel tables name it (no void, no argument list), never cut with "…";
        # the JSON has the whole signature
        assert _squash(short_kernel_name(name)) in _squash(text) and json.dumps(name) in whole
    # the CLI in a pipe of 80 columns, both ways of naming the traces
    monkeypatch.setenv("COLUMNS", "80")
    for argv in (["--compare", *tc_pair], [tc_pair[0], "--compare", tc_pair[1]]):
        assert cli.main(["diagnose", *argv]) == 0
        out = capsys.readouterr().out
        assert too_wide(out) == []
        assert _squash(short_kernel_name(TC_GEMM)) in _squash(out) and "…" not in out
    page = comparison_html(c)
    assert TC_GEMM.replace("<", "&lt;").replace(">", "&gt;") in page
    assert "…" not in page


def test_json_round_trip_and_html_file(tc_pair, tmp_path, capsys):
    assert cli.main(["diagnose", "--compare", *tc_pair, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    c = TraceComparison.from_dict(data)
    assert c.share("Tensor Cores").flagged  # type: ignore[union-attr]
    assert data["kernels"]["changes"] and data["headline"].startswith("Step time")
    page = tmp_path / "compare.html"
    assert cli.main(["diagnose", "--compare", *tc_pair, "--html", str(page)]) == 0
    assert "Tensor Cores" in page.read_text(encoding="utf-8")
    assert cli.main(["diagnose", "--compare", *tc_pair, tc_pair[0]]) == 2
    assert "two traces" in capsys.readouterr().err


# -- HTA's trace-diff pair: A100 (control) and V100 (test), step 1012 -------------------------


def _json_sums(path) -> tuple[dict[str, float], dict[str, int], float]:
    """Per name: GPU µs and count; and the ProfilerStep#1012 duration, read from the JSON."""
    data = load(path)
    t: dict[str, float] = defaultdict(float)
    n: dict[str, int] = defaultdict(int)
    for e in gpu_events(data):
        t[e["name"]] += e["dur"]
        n[e["name"]] += 1
    step = next(e["dur"] for e in data["traceEvents"] if e.get("name") == "ProfilerStep#1012")
    return t, n, float(step)


@pytest.fixture(scope="module")
def real() -> TraceComparison:
    return compare(DIFF_CONTROL, DIFF_TEST)


def test_real_pair_tensor_cores_and_precision(real):
    tb, _, _ = _json_sums(DIFF_CONTROL)
    ta, _, _ = _json_sums(DIFF_TEST)
    # Tensor-Core kernels by a plain test: CUTLASS "tensorop" tiles (the control's only kind)
    tc_b = sum(v for k, v in tb.items() if "tensorop" in k)
    assert not any(re.search(r"tensorop|xmma|h884|h1688|hmma|wgmma", k) for k in ta)
    tc = real.share("Tensor Cores")
    assert tc is not None
    assert tc.before_us == pytest.approx(tc_b)  # 11,256 µs
    assert tc.after == 0.0
    assert tc.flagged and tc.verdict == "worse"
    # the GEMM/conv time the share is of: the kernel diff's GEMM and convolution families
    # (81.2 %; the 76.5 % counted fbgemm_gpu's permute kernels as GEMMs for the "gemm"
    # in their namespace)
    assert real.kernels is not None
    mm_b = sum(f.before_us for f in real.kernels.families if f.family in ("GEMM", "convolution"))
    assert tc.before == pytest.approx(tc_b / mm_b)
    assert 0.80 < tc.before < 0.82
    sgemm_a = sum(v for k, v in ta.items() if "sgemm" in k)  # volta_sgemm, magma_sgemmEx
    fp32 = real.share("FP32", "precision")
    assert fp32 is not None and fp32.after_us >= sgemm_a and fp32.verdict == "worse"
    # the no-tensor-cores rule says "ok" on both sides (GEMM under 30 % of kernel time on the
    # V100), so only the share change shows it
    nt = next(f for f in real.findings if f.id == "no-tensor-cores")
    assert nt.before is nt.after is Status.OK


def test_real_pair_dtod_and_step_time(real):
    tb, nb, step_b = _json_sums(DIFF_CONTROL)
    ta, na, step_a = _json_sums(DIFF_TEST)
    assert (tb[DTOD], nb[DTOD], ta[DTOD], na[DTOD]) == (455.0, 3, 17076.0, 768)
    assert real.kernels is not None
    k = real.kernels.kernel(DTOD)
    assert k is not None and k.status == "slower" and k.delta_us == pytest.approx(17076 - 455)
    share = real.share("DtoD copies")
    gpu_b, gpu_a = sum(tb.values()), sum(ta.values())
    assert share is not None and share.flagged and share.verdict == "slower"
    assert share.before == pytest.approx(455 / gpu_b) and share.after == pytest.approx(
        17076 / gpu_a
    )
    step = real.metric("step time (median)")
    assert step is not None
    assert (step.before, step.after) == (pytest.approx(step_b), pytest.approx(step_a))
    assert step.verdict == "slower"
    # the headline: step time, then the GPU time that explains it, GEMM first
    h = real.headline
    assert h.startswith(f"Step time {step_b / 1e3:.1f} ms → {step_a / 1e3:.1f} ms (median)")
    assert "slower" in h and "faster" not in h
    gemm = next(f for f in real.kernels.families if f.family == "GEMM")
    assert f"GEMM +{(gemm.after_us - gemm.before_us) / 1e3:.1f} ms" in h
    assert h.index("GEMM") < h.index("memcpy/memset") and DTOD in h
    # what a person sees first: different cards and a different job size
    assert any("A100" in n and "V100" in n for n in real.notes)
    assert any("8 → 2 ranks" in n for n in real.notes)


def test_real_pair_every_flagged_share_has_a_direction(real):
    flagged = real.flagged()
    assert flagged and all(abs(s.change_pp or 0) >= SHARE_CHANGE_PP for s in flagged)
    assert all(s.verdict in ("worse", "better", "slower", "faster") for s in flagged)
    names = {(s.group, s.name) for s in flagged}
    assert ("Tensor Cores", "Tensor Cores") in names and ("copies", "DtoD copies") in names
    text = render_comparison_text(real)
    assert too_wide(text) == []
    assert not re.search(r"\d…|…\s*$", text, re.M)


# -- the headline on the loader fix: idle time, not GPU time, explains the step ---------------


def test_headline_names_the_idle_time_that_explains_the_step():
    nw0 = DIFF_CONTROL.parent / "kineto_r50_nw0_2021feb.pt.trace.json.gz"
    nw4 = DIFF_CONTROL.parent / "kineto_r50_nw4_2021feb.pt.trace.json.gz"

    def steps(path) -> list[float]:
        return sorted(
            e["dur"]
            for e in load(path)["traceEvents"]
            if e.get("ph") == "X" and re.match(r"ProfilerStep#\d+$", str(e.get("name")))
        )

    s0, s4 = steps(nw0), steps(nw4)
    med0, med4 = (s0[2] + s0[3]) / 2, (s4[2] + s4[3]) / 2  # 6 steps each
    c = compare(nw0, nw4)
    h = c.headline
    assert h.startswith(f"Step time {med0 / 1e3:.1f} ms → {med4 / 1e3:.1f} ms (median)")
    assert f"{(med0 - med4) / 1e3:.1f} ms ({100 * (med0 - med4) / med0:.0f} %) faster" in h
    assert "Most of it: GPU idle waiting for the DataLoader" in h
    assert not c.flagged()  # the same model on the same card: no share moved
    busy = c.metric("GPU busy per step")
    assert busy is not None and busy.verdict == ""  # +0.3 %: within METRIC_SAME_FRACTION
