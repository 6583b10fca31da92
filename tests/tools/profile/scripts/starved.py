"""A training loop starved by a slow single-process DataLoader."""

import sys

from _common import STEPS, Batches, model_and_optimizer, train_step
from torch.utils.data import DataLoader

workers = int(sys.argv[1]) if len(sys.argv) > 1 else 0
model, opt = model_and_optimizer()
loader = DataLoader(Batches(delay=0.003), batch_size=32, num_workers=workers)
for i, (x, y) in enumerate(loader):
    train_step(model, opt, x, y)
    if i + 1 == STEPS:
        break
print("trained", i + 1, "steps")
