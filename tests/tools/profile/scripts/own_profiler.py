"""A script that profiles itself with torch.profiler (as Lightning's profiler would)."""

import sys

import torch
from _common import STEPS, Batches, model_and_optimizer
from torch.utils.data import DataLoader

model, opt = model_and_optimizer()
loader = DataLoader(Batches(), batch_size=64)
schedule = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
with torch.profiler.profile(schedule=schedule) as prof:
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        prof.step()
        if i + 1 == STEPS:
            break
prof.export_chrome_trace(sys.argv[1])
print("own trace written")
