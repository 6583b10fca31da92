"""A training loop on the GPU with a DataLoader made on the host (for a lent card)."""

import torch
from _common import STEPS, Batches, model_and_optimizer
from torch.utils.data import DataLoader

model, _ = model_and_optimizer()
model = model.cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(Batches(delay=0.0005), batch_size=256)
for i, (x, y) in enumerate(loader):
    x, y = x.cuda(), y.cuda()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(loss.item()) if i % 10 == 0 else None
    if i + 1 == STEPS:
        break
