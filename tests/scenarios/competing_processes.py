"""Fault: three CPU-bound processes outside the job run while it trains.

Mild: two. (One would take the core the job's one thread does not use: on the 2-core
reference machine its loop thread then waits for a core ~0% of the time, and the others take
nothing from it.) Fixed: none started (the job has the machine to itself).
"""

import os
import subprocess
import sys

from _zoo import dose, fixed, mlp, tensors, train
from torch.utils.data import DataLoader

# Each hog spins until the job exits (checked every ~0.1 s), at most {s} seconds.
HOG_LIMIT_S = 300
HOG = (
    "import os, time\nend = time.time() + {s}\n"
    "while time.time() < end:\n"
    "    t = time.time() + 0.1\n"
    "    while time.time() < t:\n        pass\n"
    "    try:\n        os.kill({pid}, 0)\n    except OSError:\n        break\n"
)
HOGS = 0 if fixed() else dose(strong=3, mild=2)

if __name__ == "__main__":
    # Started through a shell that exits at once, so the hogs are not the job's children.
    for _ in range(HOGS):
        code = HOG.format(s=HOG_LIMIT_S, pid=os.getpid())
        subprocess.run(
            ["sh", "-c", f'"{sys.executable}" -c "$0" >/dev/null 2>&1 &', code], check=True
        )
    loader = DataLoader(tensors(), batch_size=64, shuffle=True)
    print("steps:", train(loader, mlp(), steps=150))
