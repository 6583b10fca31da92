"""Killed by SIGTERM at step TERM_AT (as torchrun stops the other ranks when one fails)."""

import os
import signal

import torch
from _common import Batches, model_and_optimizer
from torch.utils.data import DataLoader

at = int(os.environ.get("TERM_AT", "8"))
model, opt = model_and_optimizer()
for i, (x, y) in enumerate(DataLoader(Batches(), batch_size=64)):
    if i == at:
        os.kill(os.getpid(), signal.SIGTERM)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
