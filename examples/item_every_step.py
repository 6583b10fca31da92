"""SLOW: print the loss every step. ``loss.item()`` copies one number to the host and waits for
every queued kernel first, so the GPU drains and idles once per step (E5).

Fixed twin: item_fixed.py. Run: python examples/item_every_step.py [TRACE.json.gz]
Then: gpuprobe diagnose --compare item_every_step.json.gz item_fixed.json.gz
"""

import sys

import torch

import gpuprobe


def main(trace: str = "item_every_step.json.gz", steps: int = 8, show: bool = True):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(512, 256, device=device), torch.randn(512, 1, device=device)
    with gpuprobe.profile(trace, show=show) as prof:
        for step in range(steps):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(f"step {step}: loss {loss.item():.4f}")  # <- a sync every step
            prof.step()
    return prof.diagnosis


if __name__ == "__main__":
    main(*sys.argv[1:2])
