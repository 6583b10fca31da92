"""A job that trains until STOP_FILE appears (at most 120 s): profiled on demand. With GO_FILE,
it starts training once that file appears (at most 120 s)."""

import os
import time

from _common import Batches, model_and_optimizer, train_step
from torch.utils.data import DataLoader

stop = os.environ["STOP_FILE"]
model, opt = model_and_optimizer()
loader = DataLoader(Batches(delay=0.0002), batch_size=32)
end = time.monotonic() + 120
go = os.environ.get("GO_FILE")
while go and not os.path.exists(go) and time.monotonic() < end:
    time.sleep(0.02)
end = time.monotonic() + 120
steps = 0
while not os.path.exists(stop) and time.monotonic() < end:
    for x, y in loader:
        train_step(model, opt, x, y)
        steps += 1
        if os.path.exists(stop) or time.monotonic() > end:
            break
print("steps", steps)
