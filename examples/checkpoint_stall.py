"""A training loop that saves a checkpoint on its training thread every 50 steps: each save stalls
that step. ``gpuprobe run`` records every step with no profiler (the flight recorder) and names
the slow ones, their period, and a ``gpuprobe profile`` window that holds the next one.

    gpuprobe run -- python examples/checkpoint_stall.py [--steps 300] [--every 50]

CPU or GPU (CUDA when there is one)."""

import argparse
import os
import tempfile

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--every", type=int, default=50, help="steps between checkpoints")
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)
    ).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(16, 1024, device=device)
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "ckpt.pt")
        for step in range(args.steps):
            loss = model(x).square().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if step % args.every == args.every - 1:  # the stall: weights and Adam's state to disk
                torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, ckpt)
    print(f"{args.steps} steps on {device}, loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
