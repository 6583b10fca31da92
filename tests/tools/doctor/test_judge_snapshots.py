"""Every failure mode the doctor knows, shown on replayed snapshots (no GPU needed)."""

from __future__ import annotations

import dataclasses

import pytest

from _support import DATA
from gpuprobe.core.findings import Status
from gpuprobe.platform.frameworks.base import FrameworkInfo
from gpuprobe.platform.hardware.types import Driver, GpuProcess, PciDevice
from gpuprobe.platform.inventory import Inventory, load
from gpuprobe.tools.doctor.engine import doctor, judge
from gpuprobe.tools.doctor.rules.env import parse_visible_devices
from gpuprobe.tools.doctor.rules.frameworks import arch_supports, cuda_compat


def _inv(name: str) -> Inventory:
    return load(DATA / name)


def _ids(inv: Inventory) -> dict[str, Status]:
    return {f.id: f.status for f in judge(inv)}


def _with_torch(inv: Inventory, **changes: object) -> Inventory:
    fws = tuple(
        dataclasses.replace(f, **changes) if f.name == "torch" else f for f in inv.frameworks
    )
    return dataclasses.replace(inv, frameworks=fws)


def _with_gpu(inv: Inventory, **changes: object) -> Inventory:
    return dataclasses.replace(inv, gpus=(dataclasses.replace(inv.gpus[0], **changes),))


def test_healthy_h200_has_no_warning_or_failure() -> None:
    """The card's own snapshot (recorded 2026-11-25): nothing wrong, and CuPy's CUDA 13.2 on the
    13.0 driver is information only: every CuPy workload ran there."""
    report = doctor(inventory=_inv("h200.json"))
    assert report.exit_code == 0 and not report.live
    bad = [f for f in report.findings if f.status in (Status.WARN, Status.FAIL)]
    assert bad == []
    assert {"driver-ok", "torch-ok", "jax-ok", "gpu-ok"} <= {f.id for f in report.findings}
    cupy = report.finding("cupy-driver-older-minor")
    assert cupy is not None and cupy.status is Status.INFO
    assert "CUDA 13.2, newer than the driver's 13.0" in cupy.title and "cubin" in cupy.title


def test_a_prebuilt_framework_newer_than_the_driver_warns_of_ptx_jit() -> None:
    inv = _with_torch(_inv("h200.json"), cuda_version="13.2")
    f = next(f for f in judge(inv) if f.id == "torch-driver-older-minor")
    assert f.status is Status.WARN and "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in f.title
    assert f.fix is not None and "upgrade the NVIDIA driver" in f.fix


def test_blackwell_card_with_a_torch_lacking_sm_120() -> None:
    report = doctor(inventory=_inv("rtx5090_torch_cu124.json"))
    f = report.finding("torch-arch-missing")
    assert f is not None and f.status is Status.FAIL and report.exit_code == 1
    assert "no kernel image is available" in f.title and "sm_120" in f.title
    # the newest release with an sm_120 build the card's CUDA 12.8 driver runs (2.12+ ship no
    # cu128, and their cu130 needs a CUDA 13 driver)
    assert "whl/cu128" in f.fix and "'torch==2.11.*'" in f.fix
    assert "no torch 2.5 build has kernels for sm_120" in f.fix


def test_cpu_only_torch_on_a_gpu_machine_gets_the_matching_cuda_build() -> None:
    inv = _with_torch(
        _inv("t4.json"),
        version="2.5.1+cpu",
        cuda_version=None,
        cpu_only_build=True,
        arch_list=(),
        devices=(),
        gpu_available=False,
    )
    f = next(x for x in judge(inv) if x.id == "torch-cpu-only-build")
    assert f.status is Status.FAIL and "Torch not compiled with CUDA enabled" in f.title
    # the driver supports CUDA 12.4, and torch 2.5 ships a cu124 build
    assert f.fix == (
        "pip install --force-reinstall 'torch==2.5.1' "
        "--index-url https://download.pytorch.org/whl/cu124"
    )


def test_driver_too_old_for_the_frameworks_cuda() -> None:
    inv = _with_torch(_inv("t4.json"), version="2.9.0+cu130", cuda_version="13.0")
    f = next(x for x in judge(inv) if x.id == "torch-driver-too-old")
    assert f.status is Status.FAIL
    assert "CUDA driver version is insufficient for CUDA runtime version" in f.title
    # torch 2.9 has no build at or below CUDA 12.4; its oldest, cu126, runs on a 12.4 driver
    # through minor-version compatibility
    assert "'torch==2.9.0' --index-url https://download.pytorch.org/whl/cu126" in f.fix


def test_cuda_compat_rules() -> None:
    assert cuda_compat("13.0", "12.4") is Status.FAIL
    assert cuda_compat("12.6", "12.4") is Status.WARN  # minor-version compatibility
    assert cuda_compat("12.4", "12.4") is Status.OK
    assert cuda_compat("11.8", "12.4") is Status.OK
    assert cuda_compat("10.2", "10.1") is Status.FAIL  # before 11.1 minor compat did not exist
    assert cuda_compat(None, "12.4") is None


def test_arch_support_rules() -> None:
    archs = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
    assert arch_supports(archs, (8, 9))  # sm_86 SASS runs on 8.9 (same major, lower minor)
    assert not arch_supports(archs, (12, 0))
    assert not arch_supports(archs, (10, 0))
    assert arch_supports(("sm_80", "compute_90"), (12, 0))  # PTX JIT from compute_90
    assert not arch_supports(("sm_90a",), (9, 1)) and arch_supports(("sm_90a",), (9, 0))


def test_visible_devices_parsing_follows_cuda() -> None:
    order = ["GPU-aaaa1111", "GPU-bbbb2222"]
    assert parse_visible_devices("1,0", order).visible == ("GPU-bbbb2222", "GPU-aaaa1111")
    p = parse_visible_devices("0,5,1", order)
    assert p.visible == ("GPU-aaaa1111",) and p.ignored == ("5", "1")
    assert "out of range" in (p.problem or "")
    assert parse_visible_devices("GPU-bbbb", order).visible == ("GPU-bbbb2222",)
    p = parse_visible_devices("GPU-cccc", order)
    assert p.visible == () and "matches no GPU" in (p.problem or "")
    assert parse_visible_devices("0,0", order).visible == ("GPU-aaaa1111",)
    assert parse_visible_devices("", order).visible == ()


@pytest.mark.parametrize(
    ("value", "finding", "status"),
    [
        ("", "cuda-visible-devices-empty", Status.FAIL),
        ("3", "cuda-visible-devices-invalid", Status.FAIL),
        ("0,3", "cuda-visible-devices-invalid", Status.WARN),
        ("GPU-deadbeef", "cuda-visible-devices-invalid", Status.FAIL),
        ("0", "cuda-visible-devices", Status.INFO),
    ],
)
def test_cuda_visible_devices_findings(value: str, finding: str, status: Status) -> None:
    inv = dataclasses.replace(_inv("t4.json"), env={"CUDA_VISIBLE_DEVICES": value})
    assert _ids(inv).get(finding) is status


def test_cuda_device_order_differs_from_nvidia_smi() -> None:
    inv = _inv("t4.json")
    g0 = inv.gpus[0]
    g1 = dataclasses.replace(g0, index=1, uuid="GPU-second", pci_bus_id="0000:00:05.0")
    d0 = inv.cuda_all.devices[0]
    d1 = dataclasses.replace(d0, uuid="GPU-second", ordinal=0)
    view = dataclasses.replace(inv.cuda_all, devices=(d1, dataclasses.replace(d0, ordinal=1)))
    inv2 = dataclasses.replace(inv, gpus=(g0, g1), cuda=view, cuda_all=view)
    f = next(x for x in judge(inv2) if x.id == "cuda-device-order-differs")
    assert f.status is Status.WARN and "cuda:0 is nvidia-smi's GPU 1" in f.title
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in f.fix
    inv3 = dataclasses.replace(inv2, env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert "cuda-device-order-differs" not in _ids(inv3)


@pytest.mark.parametrize(
    ("status", "finding"),
    [
        ("version-mismatch", "driver-library-mismatch"),
        ("no-permission", "driver-no-permission"),
    ],
)
def test_driver_failures(status: str, finding: str) -> None:
    inv = dataclasses.replace(_inv("t4.json"), driver=Driver(status=status, error="x"), gpus=())
    ids = _ids(inv)
    assert ids[finding] is Status.FAIL
    if status == "version-mismatch":
        f = next(x for x in judge(inv) if x.id == finding)
        assert "reboot" in f.fix


@pytest.mark.parametrize(
    ("bound", "words"),
    [(None, "no driver is bound"), ("nouveau", "nouveau"), ("vfio-pci", "vfio-pci")],
)
def test_card_on_the_bus_without_a_working_driver_fails(bound, words: str) -> None:
    inv = dataclasses.replace(
        _inv("t4.json"),
        driver=Driver(status="no-library", error="NVML Shared Library Not Found"),
        gpus=(),
        pci_nvidia=(PciDevice("0000:00:04.0", "0x10de", "0x1eb8", "0x030200", bound),),
    )
    f = next(x for x in judge(inv) if x.id == "gpu-without-driver")
    assert f.status is Status.FAIL and words in f.title


def test_no_gpu_at_all_is_information_not_failure() -> None:
    inv = Inventory(
        driver=Driver(status="no-library"),
        frameworks=(
            FrameworkInfo(name="torch", installed=True, version="2.13.0+cpu", cpu_only_build=True),
        ),
    )
    report = doctor(inventory=inv)
    assert report.exit_code == 0
    assert report.finding("no-gpu").status is Status.INFO
    assert report.finding("torch-cpu-only-build").status is Status.INFO


def test_gpu_health_failures() -> None:
    inv = _inv("h200.json")
    assert _ids(_with_gpu(inv, ecc_uncorrected_volatile=3))["gpu-ecc-uncorrected"] is Status.FAIL
    assert _ids(_with_gpu(inv, remapped_rows_failure=True))["gpu-row-remap-failed"] is Status.FAIL
    assert (
        _ids(_with_gpu(inv, remapped_rows_pending=True))["gpu-memory-repair-pending"] is Status.WARN
    )
    assert _ids(_with_gpu(inv, mig_mode=True))["gpu-mig-no-instances"] is Status.FAIL
    assert _ids(_with_gpu(inv, persistence_mode=False))["gpu-persistence-off"] is Status.WARN
    big = GpuProcess(pid=999_999, name="python", used_memory=80 * 2**30)
    f = next(x for x in judge(_with_gpu(inv, processes=(big,))) if x.id == "gpu-other-processes")
    assert f.status is Status.WARN and "81920 MiB" in f.title


def test_framework_that_fails_to_import() -> None:
    inv = _with_torch(
        _inv("t4.json"),
        importable=False,
        error="ImportError: libcudnn.so.9: cannot open shared object file",
    )
    f = next(x for x in judge(inv) if x.id == "torch-import-failed")
    assert f.status is Status.FAIL and "libcudnn" in str(f.evidence[0])


def test_public_doctor_stays_callable_after_its_submodules_are_imported() -> None:
    import gpuprobe
    import gpuprobe.tools.doctor.rules.env

    report = gpuprobe.doctor(inventory=_inv("h200.json"))
    assert report.exit_code == 0 and report.finding("driver-ok") is not None


def test_the_h200_doctor_run_judged_again() -> None:
    """The full doctor recorded on the H200 (2026-11-25), its kernel results judged by today's
    rules: the card's host-to-device rate once, not once per framework, and JAX's default float32
    matmul named for what it was (TF32 on tensor cores: 238.7 TFLOP/s over a 67 TFLOP/s float32
    peak), while torch's and CuPy's full float32 (51.4 TFLOP/s) are not."""
    import gzip
    import json

    from gpuprobe.tools.doctor.model import DoctorContext, DoctorReport
    from gpuprobe.tools.doctor.rules.kernels import judge_gpus

    data = json.loads(gzip.decompress((DATA / "doctor" / "h200_doctor.json.gz").read_bytes()))
    rec = DoctorReport.from_dict(data)
    found = judge_gpus(DoctorContext(rec.inventory, rec.workers))
    ids = [f.id for f in found]
    assert ids.count("pcie-h2d") == 1
    h2d = next(f for f in found if f.id == "pcie-h2d")
    assert h2d.subject == "GPU 0 (NVIDIA H200)" and "55.4 GB/s (88% of the link's 63.0" in h2d.title
    jax = next(f for f in found if f.id == "jax-float32-on-tensor-cores")
    assert jax.status is Status.INFO and "238.7 TFLOP/s, 3.6× the card's float32 peak" in jax.title
    assert jax.fix is not None and "jax_default_matmul_precision', 'highest'" in jax.fix
    assert {"torch-gpu-kernels-ok", "cupy-gpu-kernels-ok", "jax-gpu-kernels-ok"} <= set(ids)
    assert "torch-float32-on-tensor-cores" not in ids and "cupy-float32-on-tensor-cores" not in ids


def test_group_headings_keep_acronyms_in_capitals() -> None:
    """Issue 27: str.capitalize printed the GPU group as "Gpu"."""
    from gpuprobe.tools.doctor.show import doctor_html, doctor_text, group_heading

    assert group_heading("gpu") == "GPU"
    assert group_heading("driver") == "Driver"
    assert group_heading("cuda toolkit") == "CUDA toolkit"
    report = doctor(inventory=_inv("h200.json"))
    assert "gpu" in report.by_group()
    lines = doctor_text(report).splitlines()
    assert "GPU" in {line.strip() for line in lines} and "Gpu" not in doctor_text(report)
    assert ">GPU</th>" in doctor_html(report)
