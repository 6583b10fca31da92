"""A loop whose DataLoader workers start with spawn (or forkserver: argv[1])."""

import sys

from _common import STEPS, Batches, model_and_optimizer, train_step
from torch.utils.data import DataLoader


def main(context):
    model, opt = model_and_optimizer()
    loader = DataLoader(Batches(), batch_size=64, num_workers=2, multiprocessing_context=context)
    for i, (x, y) in enumerate(loader):
        train_step(model, opt, x, y)
        if i + 1 == STEPS:
            break
    print("trained", i + 1, "steps")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "spawn")
