"""Fault: two CPU-bound processes outside the job run while it trains."""

import subprocess
import sys

from _zoo import SECONDS, mlp, tensors, train
from torch.utils.data import DataLoader

HOG = "import time\nend = time.time() + {s}\nwhile time.time() < end:\n    pass\n"

if __name__ == "__main__":
    # Started through a shell that exits at once, so the hogs are not the job's children.
    for _ in range(2):
        code = HOG.format(s=SECONDS + 8)
        subprocess.run(["sh", "-c", f'"{sys.executable}" -c "$0" >/dev/null 2>&1 &', code],
                       check=True)
    loader = DataLoader(tensors(), batch_size=64, shuffle=True)
    print("steps:", train(loader, mlp()))
