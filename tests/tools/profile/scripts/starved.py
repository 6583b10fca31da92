"""A training loop starved by a slow single-process DataLoader."""

import sys

import torch
from _common import STEPS, Batches, model_and_optimizer
from torch.utils.data import DataLoader

workers = int(sys.argv[1]) if len(sys.argv) > 1 else 0
model, opt = model_and_optimizer()
loader = DataLoader(Batches(delay=0.003), batch_size=32, num_workers=workers)
for i, (x, y) in enumerate(loader):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if i + 1 == STEPS:
        break
print("trained", i + 1, "steps")
