"""Opens the legacy autograd profiler around one iteration (LEGACY_AT), as old code does."""

import os

import torch
from _common import STEPS, Batches, model_and_optimizer
from torch.utils.data import DataLoader

at = int(os.environ.get("LEGACY_AT", "5"))
model, opt = model_and_optimizer()
loader = DataLoader(Batches(), batch_size=64)
for i, (x, y) in enumerate(loader):
    if i == at:
        with torch.autograd.profiler_legacy.profile() as prof:
            loss = torch.nn.functional.cross_entropy(model(x), y)
        print("legacy profiler saw", len(prof.function_events) > 0)
    else:
        loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if i + 1 == STEPS:
        break
print("done")
