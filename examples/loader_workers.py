"""FIXED twin of loader_single_process.py: worker processes decode the images ahead of the model
(num_workers=2, persistent, 2 batches ahead each) into pinned memory, so the copy to the GPU is
asynchronous, and the augmentation runs on the device, on whole batches (E9, E10).

Workers alone are not enough for a fast GPU: the augmentation costs about 0.5 ms of CPU per
image, so one worker makes a batch of 128 in about 70 ms while an H200 trains on it in 13-20 ms;
it would take 4 to 6 workers, each on a free core, just to keep up. On the GPU the same
augmentation is a dozen small kernels per batch.

Measured on a 2-core CPU (AMD EPYC, torch 2.13, no GPU): not input-bound, the DataLoader takes
about 1 % of each profiled step (at most 2.4 % with 3 busy processes beside it), in steps 9..11,
past the batches the workers made ahead at start-up. On an H200 (an estimate; a card must
confirm it): a worker decodes a batch in about 3 ms, the CPU launches a step in about 3 ms and
the GPU runs it in 13-20 ms: neither input- nor launch-bound.

Run: python examples/loader_workers.py [TRACE.json.gz [STEPS]]
"""

import os
import sys

from torch.utils.data import DataLoader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from loader_single_process import BATCH, GPU, PREFETCH, STEPS, WORKERS, Images, train


def main(trace: str = "loader_workers.json.gz", steps: int = STEPS, show: bool = True):
    # the fix: worker processes decode ahead of the model, into pinned memory; no transform here:
    # train() augments each whole batch on the device
    loader = DataLoader(
        Images(),
        batch_size=BATCH,
        shuffle=True,
        num_workers=WORKERS,
        prefetch_factor=PREFETCH,
        persistent_workers=True,
        pin_memory=GPU,
    )
    return train(trace, loader, augment_batches=True, steps=steps, show=show)


if __name__ == "__main__":
    main(*sys.argv[1:2], *(int(a) for a in sys.argv[2:3]))
