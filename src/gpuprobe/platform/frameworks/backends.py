"""Make a :class:`~gpuprobe.platform.frameworks.base.Backend` by framework name and device string."""

from __future__ import annotations

from gpuprobe.core.errors import UsageError
from gpuprobe.platform.frameworks.base import Backend

__all__ = ["BACKENDS", "make_backend"]

# framework -> devices it can run on ("cuda" means cuda:N)
BACKENDS: dict[str, tuple[str, ...]] = {
    "numpy": ("cpu",),
    "torch": ("cpu", "cuda"),
    "cupy": ("cuda",),
    "jax": ("cpu", "cuda"),
}


def make_backend(framework: str, device: str) -> Backend:
    """A backend for ``framework`` on ``device`` (``cpu`` or ``cuda:N``)."""
    kind = device.partition(":")[0]
    if framework not in BACKENDS:
        raise UsageError(f"unknown backend {framework!r}; choose from {', '.join(BACKENDS)}")
    if kind not in BACKENDS[framework]:
        raise UsageError(
            f"{framework} cannot run on {device!r}; it runs on {', '.join(BACKENDS[framework])}"
        )
    if framework == "numpy":
        from gpuprobe.platform.frameworks.numpy import NumpyBackend

        return NumpyBackend()
    if framework == "torch":
        from gpuprobe.platform.frameworks.torch import TorchBackend

        return TorchBackend(device)
    if framework == "cupy":
        from gpuprobe.platform.frameworks.cupy import CupyBackend

        return CupyBackend(device)
    from gpuprobe.platform.frameworks.jax import JaxBackend

    return JaxBackend(device)
