"""The PyTorch install matrix: builds per release, architectures per build, and the choice of the
newest build that both the driver and the card run."""

from __future__ import annotations

import itertools

import pytest

from gpuprobe.platform.frameworks.torch_builds import TORCH_BUILDS, choose_build, install_command
from gpuprobe.platform.hardware.specs import arch_supports

PASCAL, VOLTA, TURING, AMPERE, HOPPER = (6, 1), (7, 0), (7, 5), (8, 0), (9, 0)
B200 = GB200 = (10, 0)
B300 = (10, 3)
RTX50 = (12, 0)
KEPLER = (3, 5)


def test_the_matrix_covers_2_0_to_2_14_with_what_each_release_ships() -> None:
    assert [f"2.{i}" for i in range(15)] == sorted(TORCH_BUILDS, key=lambda v: int(v[2:]))
    cudas = {v: set(b) for v, b in TORCH_BUILDS.items()}
    assert cudas["2.0"] == {"11.7", "11.8"} and cudas["2.7"] == {"11.8", "12.6", "12.8"}
    for v in ("2.12", "2.13", "2.14"):  # CUDA 12.6/13.0/13.2, no cu128
        assert cudas[v] == {"12.6", "13.0", "13.2"}
    # which builds hold which cards
    for v in ("2.8", "2.9", "2.10", "2.11"):
        assert "sm_50" not in TORCH_BUILDS[v]["12.8"] and "sm_60" not in TORCH_BUILDS[v]["12.8"]
    assert "sm_70" in TORCH_BUILDS["2.10"]["12.8"] and "sm_70" not in TORCH_BUILDS["2.11"]["12.8"]
    for v, builds in TORCH_BUILDS.items():
        for cuda, archs in builds.items():
            if cuda.startswith("13."):  # CUDA 13 compiles nothing older than Turing
                assert not any(arch_supports(archs, cc) for cc in (PASCAL, VOLTA)), (v, cuda)
            has_blackwell = arch_supports(archs, B200) and arch_supports(archs, RTX50)
            assert has_blackwell == (tuple(map(int, cuda.split("."))) >= (12, 8)), (v, cuda)


@pytest.mark.parametrize(
    ("torch", "driver", "cc", "want"),
    [
        (
            "2.13.0",
            "12.8",
            AMPERE,
            "'torch==2.13.0' --index-url https://download.pytorch.org/whl/cu126",
        ),
        ("2.13.0", "13.2", AMPERE, "whl/cu132"),
        (
            "2.9.1",
            "13.0",
            PASCAL,
            "'torch==2.9.1' --index-url https://download.pytorch.org/whl/cu126",
        ),
        ("2.11.0", "13.0", VOLTA, "whl/cu126"),  # 2.11's cu128 and cu130 dropped sm_70
        ("2.10.0", "12.9", VOLTA, "whl/cu128"),
        (
            "2.6.0",
            "12.8",
            B200,
            "'torch==2.11.*' --index-url https://download.pytorch.org/whl/cu128",
        ),
        (
            "2.6.0",
            "13.0",
            GB200,
            "'torch==2.14.*' --index-url https://download.pytorch.org/whl/cu130",
        ),
        ("2.6.0", "13.0", B300, "whl/cu130"),
        (
            "2.5.1",
            "12.9",
            RTX50,
            "'torch==2.11.*' --index-url https://download.pytorch.org/whl/cu128",  # newest release wins
        ),
        (
            "2.7.1",
            "12.8",
            RTX50,
            "'torch==2.7.1' --index-url https://download.pytorch.org/whl/cu128",
        ),
    ],
)
def test_the_newest_build_the_driver_and_the_card_run(torch, driver, cc, want) -> None:
    cmd = install_command(torch, driver, ccs=[cc])
    assert want in cmd
    assert "torch==2.6" not in cmd  # a B200 on torch 2.6 is never told to reinstall 2.6


def test_saying_when_no_build_fits() -> None:
    assert "update the NVIDIA driver" in install_command("2.6.0", "12.4", ccs=[B200])
    assert "needs CUDA 12.8" in install_command("2.9.0", "11.8", ccs=[RTX50])
    assert "needs an older torch" in install_command("2.6.0", "12.8", ccs=[KEPLER])
    assert choose_build("2.6.0", "11.8", [RTX50]).build is None
    # a Pascal and a Blackwell card together: 2.7's cu128 is the only build with both
    both = choose_build("2.13.0", "13.0", [PASCAL, RTX50])
    assert both.build is not None and (both.build.torch, both.build.cuda) == ("2.7", "12.8")


def _v(text: str) -> tuple[int, ...]:
    return tuple(map(int, text.split(".")))


def test_every_choice_runs_on_the_driver_and_holds_the_card() -> None:
    drivers = ("11.8", "12.2", "12.4", "12.6", "12.8", "12.9", "13.0", "13.2")
    cards = (KEPLER, (3, 7), (5, 2), PASCAL, VOLTA, TURING, AMPERE, (8, 9), HOPPER, B200, RTX50)
    n = 0
    for torch, driver, cc in itertools.product(TORCH_BUILDS, drivers, cards):
        choice = choose_build(f"{torch}.0", driver, [cc])
        own = [c for c, a in TORCH_BUILDS[torch].items() if arch_supports(a, cc)]
        strict = [c for c in own if _v(c) <= _v(driver)]
        compat = [c for c in own if _v(c)[0] == _v(driver)[0]]
        if choice.build is None:  # nothing in the whole matrix fits: check that is true
            assert not any(
                arch_supports(a, cc) and _v(c) <= _v(driver)
                for row in TORCH_BUILDS.values()
                for c, a in row.items()
            ), (torch, driver, cc)
            continue
        b = choice.build
        n += 1
        assert arch_supports(b.archs, cc), (torch, driver, cc, b)
        if strict:  # the user's release has a build the driver runs: its newest one
            assert (b.torch, b.cuda) == (torch, max(strict, key=_v))
        elif compat:  # minor-version compatibility within the driver's CUDA major
            assert b.torch == torch and _v(b.cuda)[0] == _v(driver)[0]
        else:  # another release, whose build the driver runs as it is
            assert b.torch != torch and _v(b.cuda) <= _v(driver)
    assert n > 900
