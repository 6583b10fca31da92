"""A training loop that crashes at step CRASH_AT (a bad batch)."""

import os

from _common import Batches, model_and_optimizer, train_step
from torch.utils.data import DataLoader

crash_at = int(os.environ.get("CRASH_AT", "14"))
model, opt = model_and_optimizer()
loader = DataLoader(Batches(), batch_size=64)
for i, (x, y) in enumerate(loader):
    if i == crash_at:
        raise RuntimeError(f"bad batch {i}")
    train_step(model, opt, x, y)
