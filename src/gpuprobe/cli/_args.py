"""argparse value types shared by the memory commands (fit, precision): one line of error
text each, which argparse turns into ``gpuprobe: argument ...: <text>`` and exit code 2."""

from __future__ import annotations

import argparse

# a whole number of 1 or more: the one scale already defines
from gpuprobe.cli.scale import _positive as positive_int

__all__ = ["positive_int", "size_bytes"]


def size_bytes(text: str) -> int:
    """A size like ``2GiB`` or ``512MiB``, more than 0 bytes."""
    from gpuprobe.memory.oom import parse_size

    try:
        value = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text}: the cap must be more than 0 bytes")
    return value
