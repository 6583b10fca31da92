"""Two ranks (torchrun, gloo) training a DDP model; rank 1 is slowed by its input."""

import time

import torch
import torch.distributed as dist
from _common import STEPS, model_and_optimizer

dist.init_process_group("gloo")
rank = dist.get_rank()
model, _ = model_and_optimizer()
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
for _ in range(STEPS):
    if rank == 1:
        time.sleep(0.01)  # a slower input pipeline on rank 1: the straggler
    x, y = torch.randn(64, 64), torch.randint(0, 10, (64,))
    loss = torch.nn.functional.cross_entropy(ddp(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
dist.destroy_process_group()
print("rank", rank, "done")
