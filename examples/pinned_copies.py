"""FIXED twin of pageable_copies.py (needs a CUDA GPU): pinned host memory and
``non_blocking=True`` let the copy run at full bus speed while the GPU computes (E10).

Run: python examples/pinned_copies.py [TRACE.json.gz]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pageable_copies import train


def main(trace: str = "pinned_copies.json.gz", steps: int = 8, show: bool = True):
    return train(trace, pinned=True, steps=steps, show=show)


if __name__ == "__main__":
    main(*sys.argv[1:2])
