"""FIXED twin of loader_single_process.py: worker processes prepare batches ahead of the model
(num_workers=2, persistent, prefetching), and pinned memory makes the copy asynchronous (E9, E10).

Run: python examples/loader_workers.py [TRACE.json.gz [STEPS]]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from loader_single_process import train


def main(trace: str = "loader_workers.json.gz", steps: int = 7, show: bool = True):
    return train(trace, num_workers=2, steps=steps, show=show)


if __name__ == "__main__":
    main(*sys.argv[1:2], *(int(a) for a in sys.argv[2:3]))
