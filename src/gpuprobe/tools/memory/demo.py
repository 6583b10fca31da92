"""The small built-in models that ``gpuprobe fit`` and ``gpuprobe precision`` run, and steps with
a known memory cost for tests and benchmarks. Random weights, no download; torch comes through
:mod:`gpuprobe.platform.frameworks.torch`.

Every step is a module-level function (so it pickles into a trial's child process); models are
built on first use and cached per process.
"""

from __future__ import annotations

import os
from typing import Any

from gpuprobe.platform.frameworks import torch as ft

__all__ = [
    "DEMO_ENCODER",
    "DEMO_MLP",
    "alloc_step",
    "best_device",
    "check_device",
    "encoder",
    "encoder_inputs",
    "mlp_train_step",
    "oom_past",
    "pid_step",
]

# The fit demo: an MLP whose activations, not its weights, fill memory as the batch grows.
DEMO_MLP = {"features": 256, "width": 256, "depth": 12, "classes": 10}
# The precision demo: a TransformerEncoder (BERT-like block, small).
DEMO_ENCODER = {"d_model": 256, "nhead": 4, "layers": 4, "dim_feedforward": 1024, "seq": 128}

_CACHE: dict[tuple[Any, ...], Any] = {}


def best_device() -> str:
    """``cuda`` when torch sees a GPU, else ``cpu``."""
    torch = ft.require("the demo")
    return "cuda" if torch.cuda.is_available() else "cpu"


def check_device(device: str) -> None:
    """Refuse, in one line, a device torch cannot run the demo on here (not cpu, cuda or cuda:N;
    a CPU-only build, no GPU, or no GPU N), before a model is built on it."""
    ft.check_device(device)


def _mlp(device: str) -> tuple[Any, Any]:
    key = ("mlp", device)
    if key not in _CACHE:
        torch = ft.require("the fit demo")
        torch.manual_seed(0)
        d = DEMO_MLP
        layers: list[Any] = [torch.nn.Linear(d["features"], d["width"])]
        for _ in range(d["depth"]):
            layers += [
                torch.nn.LayerNorm(d["width"]),
                torch.nn.GELU(),
                torch.nn.Linear(d["width"], d["width"]),
            ]
        layers.append(torch.nn.Linear(d["width"], d["classes"]))
        model = torch.nn.Sequential(*layers).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
        _CACHE[key] = (model, opt)
    return _CACHE[key]


def mlp_train_step(batch_size: int, device: str = "cpu") -> float:
    """One training step of the demo MLP on a random batch; returns the loss."""
    torch = ft.require("the fit demo")
    model, opt = _mlp(device)
    x = torch.randn(batch_size, DEMO_MLP["features"], device=device)
    y = torch.randint(0, DEMO_MLP["classes"], (batch_size,), device=device)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return float(loss.detach())


def alloc_step(batch_size: int, bytes_per_sample: int = 2**20) -> int:
    """Allocate and touch ``batch_size * bytes_per_sample`` bytes through torch's CPU allocator:
    a step whose memory is known exactly. Returns the bytes."""
    torch = ft.require("alloc_step")
    n = batch_size * bytes_per_sample
    buf = torch.empty(n, dtype=torch.uint8)
    buf.fill_(1)
    return int(buf[-1].item()) * n


def oom_past(batch_size: int, limit: int, bytes_per_sample: int = 4096) -> int:
    """A CPU step that fits up to ``limit`` and past it asks torch's allocator for an
    impossible size, which raises its real "DefaultCPUAllocator: can't allocate memory" error."""
    torch = ft.require("oom_past")
    n = batch_size * bytes_per_sample if batch_size <= limit else 2**62
    buf = torch.ones(n, dtype=torch.uint8)
    return int(buf.sum().item())


def pid_step(batch_size: int) -> int:
    """The process id a step runs in (tests check that isolated trials run elsewhere)."""
    return os.getpid() + 0 * batch_size


def encoder(device: str = "cpu") -> Any:
    """The precision demo's encoder: ``nn.TransformerEncoder`` with random weights, eval mode."""
    check_device(device)
    torch = ft.require("the precision demo")
    torch.manual_seed(0)
    d = DEMO_ENCODER
    layer = torch.nn.TransformerEncoderLayer(
        d_model=d["d_model"],
        nhead=d["nhead"],
        dim_feedforward=d["dim_feedforward"],
        batch_first=True,
        dropout=0.0,
    )
    return (
        torch.nn.TransformerEncoder(layer, num_layers=d["layers"], enable_nested_tensor=False)
        .to(device)
        .eval()
    )


def encoder_inputs(batch: int = 8, device: str = "cpu") -> Any:
    """A random batch for :func:`encoder`: (batch, seq, d_model) float32."""
    torch = ft.require("the precision demo")
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, DEMO_ENCODER["seq"], DEMO_ENCODER["d_model"], generator=g)
    return x.to(device)
