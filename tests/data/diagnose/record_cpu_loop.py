"""How cpu_mlp_slow_loader*.json.gz were recorded (see SOURCES.md): a small MLP trained on the
CPU with a slow Dataset (a 2 ms sleep in ``__getitem__`` stands for decoding: it is the workload
being diagnosed), profiled with torch.profiler over a schedule (wait 1, warm-up 1, 4 steps).

    python tests/data/diagnose/record_cpu_loop.py OUT.json [stack]

``stack`` records with_stack=True (python_function events, ``nn.Module: ...`` frames).
"""

from __future__ import annotations

import sys
import time

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule


class Slow(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.002)  # the slow input being diagnosed: 2 ms per sample
        g = torch.Generator().manual_seed(i)
        return torch.randn(64, generator=g), int(i % 10)


def main(out: str, stack: bool) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(2)
    model = nn.Sequential(
        nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    loader = torch.utils.data.DataLoader(Slow(), batch_size=8, num_workers=0)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=4, repeat=1),
        with_stack=stack,
    ) as prof:
        for i, (x, y) in enumerate(loader):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            prof.step()
            if i == 8:
                break
    prof.export_chrome_trace(out)


if __name__ == "__main__":
    main(sys.argv[1], len(sys.argv) > 2 and sys.argv[2] == "stack")
