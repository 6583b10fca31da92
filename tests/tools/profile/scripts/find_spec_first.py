"""Asks importlib whether torch is installed before importing it, as transformers, accelerate
and diffusers do at their import; then trains (the starved loop)."""

import importlib.util

assert importlib.util.find_spec("torch") is not None
import starved  # noqa: E402, F401  (trains at import)
