"""The array libraries gpuprobe knows (numpy, torch, cupy, jax, numba), each behind one door.

Each ``frameworks/<name>.py`` is the only module that imports that library. It offers
``static_probe()`` (what is installed, read from package metadata without importing it),
``runtime_probe()`` (imports it; run in a child process) and, for array libraries, a ``Backend``
used by the doctor's kernel checks and by ``bench``.
"""

from __future__ import annotations

__all__ = ["FRAMEWORKS"]

# Probed in this order; numpy is the CPU baseline and always present.
FRAMEWORKS: tuple[str, ...] = ("torch", "cupy", "jax", "numba")
