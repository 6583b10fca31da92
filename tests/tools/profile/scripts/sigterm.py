"""Killed by SIGTERM at step TERM_AT (as torchrun stops the other ranks when one fails)."""

import os
import signal

from _common import Batches, model_and_optimizer, train_step
from torch.utils.data import DataLoader

at = int(os.environ.get("TERM_AT", "8"))
model, opt = model_and_optimizer()
for i, (x, y) in enumerate(DataLoader(Batches(), batch_size=64)):
    if i == at:
        os.kill(os.getpid(), signal.SIGTERM)
    train_step(model, opt, x, y)
