"""A training loop that reads the loss with .item() every step, and logs a metric too."""

import torch
from _common import STEPS, Batches, model_and_optimizer
from torch.utils.data import DataLoader

model, opt = model_and_optimizer()
loader = DataLoader(Batches(), batch_size=256)
total = 0.0
for i, (x, y) in enumerate(loader):
    out = model(x)
    loss = torch.nn.functional.cross_entropy(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    total += loss.item()
    accuracy = (out.argmax(1) == y).float().mean().item()
    if i + 1 == STEPS:
        break
print("mean loss", total / STEPS, "last accuracy", accuracy)
