"""FIXED twin of item_every_step.py: keep the running loss on the device and read it every
``LOG_EVERY`` steps, so no step waits for the GPU (E5).

Run: python examples/item_fixed.py [TRACE.json.gz]
"""

import sys

import torch

import gpuprobe

LOG_EVERY = 100


def main(trace: str = "item_fixed.json.gz", steps: int = 8, show: bool = True):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(512, 256, device=device), torch.randn(512, 1, device=device)
    total = torch.zeros((), device=device)
    with gpuprobe.profile(trace, show=show) as prof:
        for step in range(steps):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.detach()  # stays on the device
            if (step + 1) % LOG_EVERY == 0:
                print(f"step {step}: mean loss {total.item() / LOG_EVERY:.4f}")
                total.zero_()
            prof.step()
    print(f"last loss {loss.item():.4f}")  # once, after the loop
    return prof.diagnosis


if __name__ == "__main__":
    main(*sys.argv[1:2])
