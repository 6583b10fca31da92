"""A GAN's loop: two optimizers step each iteration (the discriminator's, then the generator's);
the first to step is the one whose steps are counted. With NEW_OPT=K a fresh optimizer of
another class replaces the generator's every K iterations (a schedule that rebuilds it)."""

import os

import torch
from _common import STEPS, Batches
from torch.utils.data import DataLoader

every = int(os.environ.get("NEW_OPT", "0"))
disc, gen = torch.nn.Linear(16, 10), torch.nn.Linear(16, 16)
opt_d = torch.optim.SGD(disc.parameters(), lr=0.01)
opt_g = torch.optim.Adam(gen.parameters(), lr=0.01)
loader = iter(DataLoader(Batches(), batch_size=32))
for step in range(STEPS):
    x, y = next(loader)
    x = x[:, :16]
    loss_d = torch.nn.functional.cross_entropy(disc(gen(x).detach()), y)
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()
    loss_g = -torch.nn.functional.cross_entropy(disc(gen(x)), y)
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
    if every and (step + 1) % every == 0:
        opt_g = torch.optim.RMSprop(gen.parameters(), lr=0.01)
print("iterations", STEPS)
