"""A job for tests/experiments/test_tuning_run.py: an object torn down with the interpreter
(it writes ``$TORN``), an exit handler (``$MARK``), a process pool left open (its worker
leaves only when ``concurrent.futures`` shuts it down at exit), and a DataLoader worker;
the pids of its child processes are written to ``$WORKERS`` each step. It steps until
stopped (800 steps)."""

import atexit
import concurrent.futures
import multiprocessing
import os
import sys
import types

import torch
from torch.utils.data import DataLoader, TensorDataset


class Noisy:
    def __del__(self, open=open, path=os.environ["TORN"]):  # at the interpreter's teardown
        with open(path, "w") as f:
            f.write("torn down")


holder = types.ModuleType("holder")
holder.noisy = Noisy()
sys.modules["holder"] = holder


@atexit.register
def _mark() -> None:
    with open(os.environ["MARK"], "w") as f:
        f.write("atexit ran")


pool = concurrent.futures.ProcessPoolExecutor(1)  # never shut down by the job
pool.submit(abs, -1).result()
loader = DataLoader(
    TensorDataset(torch.randn(64, 4)), batch_size=8, num_workers=1, persistent_workers=True
)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _epoch in range(100):
    for (x,) in loader:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        with open(os.environ["WORKERS"], "w") as f:
            f.write(" ".join(str(p.pid) for p in multiprocessing.active_children()))
