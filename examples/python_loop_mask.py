"""SLOW: turn a segmentation map into one bit mask per class with a Python loop: 2 images × 80
classes = 160 tiny ops per step, each a separate launch on a GPU (E10).

Fixed twin: vectorized_mask.py. Run: python examples/python_loop_mask.py [TRACE.json.gz]
"""

import sys

import torch

import gpuprobe

CLASSES = 80


def masks_loop(seg: torch.Tensor) -> torch.Tensor:
    out = torch.empty(seg.shape[0], CLASSES, *seg.shape[1:], dtype=torch.bool, device=seg.device)
    for b in range(seg.shape[0]):
        for c in range(CLASSES):
            out[b, c] = seg[b] == c  # one comparison and one copy per class per image
    return out


def main(trace: str = "python_loop_mask.json.gz", steps: int = 6, show: bool = True):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    seg = torch.randint(0, CLASSES, (2, 64, 64), device=device)
    with gpuprobe.profile(trace, show=show) as prof:
        for _ in range(steps):
            masks = masks_loop(seg)
            prof.step()
    assert masks.sum() == seg.numel()
    return prof.diagnosis


if __name__ == "__main__":
    main(*sys.argv[1:2])
