"""At step 12 (inside the default window, steps 10..16) ends as END says: ``os_exit`` calls
os._exit(3); ``hup_parent`` sends SIGHUP to its parent (gpuprobe, which passes it on) and goes on
stepping slowly until the hang-up ends it."""

import os
import signal
import time

from _common import Batches, model_and_optimizer, train_step
from torch.utils.data import DataLoader

how = os.environ["END"]
model, opt = model_and_optimizer()
for i, (x, y) in enumerate(DataLoader(Batches(), batch_size=64)):
    train_step(model, opt, x, y)
    if i == 12 and how == "os_exit":
        os._exit(3)
    if i == 12 and how == "hup_parent":
        os.kill(os.getppid(), signal.SIGHUP)
    if i > 12:
        time.sleep(0.1)
    if i == 200:
        break
print("not ended")
