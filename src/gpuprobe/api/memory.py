"""Memory and precision: OOM explanations, fit, the precision sweep, the demo models. Part of :mod:`gpuprobe.api`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the types only; at run time each function imports what it calls
    from collections.abc import Callable, Sequence

    from gpuprobe.tools.memory.model import FitResult, FitTrial, PrecisionReport
    from gpuprobe.tools.memory.oom.classify import OomError
    from gpuprobe.tools.memory.oom.report import OomReport

__all__ = [
    "classify_oom",
    "demo_device",
    "demo_encoder",
    "demo_fit_step",
    "demo_models",
    "explain_oom",
    "fit",
    "install_oom_hook",
    "precision_dtypes",
    "precision_sweep",
    "uninstall_oom_hook",
]


def explain_oom(
    exc: BaseException | None = None, *, release: bool = True, top: int = 10
) -> OomReport:
    """Explain a CUDA out-of-memory error (``exc``, default the one being handled): what asked
    for how much, what holds the card (this process's tensors, the allocator's cache, other
    processes), and the fix. ``release`` frees the cache after reading it; ``top`` live tensors
    are listed."""
    from gpuprobe.tools.memory.oom.explain import explain_oom as _explain_oom

    return _explain_oom(exc, release=release, top=top)


def install_oom_hook() -> None:
    """From now on, an uncaught out-of-memory error also prints :func:`explain_oom`'s report."""
    from gpuprobe.tools.memory.oom.hook import install_oom_hook as _install

    _install()


def uninstall_oom_hook() -> None:
    """Undo :func:`install_oom_hook`: uncaught errors are printed as Python prints them again."""
    from gpuprobe.tools.memory.oom.hook import uninstall_oom_hook as _uninstall

    _uninstall()


def fit(
    step: Callable[[int], Any],
    batch_sizes: Sequence[int] | range = range(1, 4097),
    *,
    tolerance: float = 0.05,
    repeats: int = 3,
    device: str | None = None,
    isolate: bool = False,
    memory_limit: int | None = None,
    curve: bool = True,
    on_trial: Callable[[FitTrial], None] | None = None,
) -> FitResult:
    """The largest batch size in ``batch_sizes`` for which ``step(batch_size)`` fits in memory
    (within ``tolerance``), and the throughput at each size tried. ``isolate`` runs each trial
    in a child process, under ``memory_limit`` bytes when given."""
    from gpuprobe.tools.memory.fit import fit as _fit

    return _fit(
        step,
        batch_sizes,
        tolerance=tolerance,
        repeats=repeats,
        device=device,
        isolate=isolate,
        memory_limit=memory_limit,
        curve=curve,
        on_trial=on_trial,
    )


def precision_sweep(
    model: Any,
    example_inputs: Any,
    dtypes: Sequence[str] = ("fp32", "tf32", "bf16", "fp16", "int8"),
    *,
    metric: Callable[[Any, Any], float] | None = None,
    budget_s: float = 0.5,
    device: str | None = None,
) -> PrecisionReport:
    """Latency and error of ``model`` on ``example_inputs`` at each precision in ``dtypes``,
    against fp32, on ``device`` (default: the first GPU, else the CPU)."""
    from gpuprobe.tools.memory.precision import precision_sweep as _sweep

    return _sweep(model, example_inputs, dtypes, metric=metric, budget_s=budget_s, device=device)


def precision_dtypes() -> tuple[str, ...]:
    """The precisions :func:`precision_sweep` knows, in the order it runs them (fp32 first: the
    reference the others are measured against)."""
    from gpuprobe.tools.memory.precision import DTYPES

    return DTYPES


def classify_oom(exc: BaseException) -> OomError | None:
    """What an out-of-memory error says (the request, the device, the allocator's numbers) when
    ``exc`` (or an exception it was raised from) is one, from any framework; else None."""
    from gpuprobe.tools.memory.oom.classify import classify_oom as _classify

    return _classify(exc)


def demo_device() -> str:
    """Where the demo models of ``gpuprobe fit`` and ``gpuprobe precision`` run by default:
    ``cuda`` when torch sees a GPU, else ``cpu`` (torch is needed)."""
    from gpuprobe.tools.memory.demo import best_device

    return best_device()


def demo_models() -> dict[str, dict[str, int]]:
    """The shapes of the demo models: ``"mlp"`` (what :func:`demo_fit_step` trains) and
    ``"encoder"`` (what :func:`demo_encoder` builds)."""
    from gpuprobe.tools.memory.demo import DEMO_ENCODER, DEMO_MLP

    return {"mlp": DEMO_MLP, "encoder": DEMO_ENCODER}


def demo_fit_step(device: str) -> Callable[[int], float]:
    """One SGD training step of the demo MLP at a batch size, on ``device``: a ``step`` for
    :func:`fit` (it pickles into a trial's child process)."""
    import functools

    from gpuprobe.tools.memory.demo import check_device, mlp_train_step

    check_device(device)
    return functools.partial(mlp_train_step, device=device)


def demo_encoder(batch: int, device: str) -> tuple[Any, Any]:
    """The demo ``nn.TransformerEncoder`` (random weights, no download) on ``device`` and a
    ``batch`` of random inputs for it: a model and inputs for :func:`precision_sweep`."""
    from gpuprobe.tools.memory.demo import encoder, encoder_inputs

    model = encoder(device)
    return model, encoder_inputs(batch, device)
