"""Fault: every step logs per-sample outputs as JSON lines (heavy post-processing).

Mild: half the rows logged (32 of the first layer's weight rows instead of 64). Fixed: the
loss is logged every step and the weights every 100 steps.
"""

import json
import os
import tempfile

from _zoo import dose, fixed, mlp, tensors, train
from torch.utils.data import DataLoader

ROWS = dose(strong=64, mild=32)
WEIGHTS_EVERY = 100 if fixed() else 1

if __name__ == "__main__":
    loader = DataLoader(tensors(), batch_size=64, shuffle=True)
    model = mlp()
    log = open(os.path.join(tempfile.mkdtemp(), "metrics.jsonl"), "w")

    def after_step(step: int, loss: object) -> None:
        record: dict[str, object] = {"step": step, "loss": float(loss)}  # type: ignore[arg-type]
        if step % WEIGHTS_EVERY == 0:
            record["w"] = model[0].weight.detach()[:ROWS].tolist()
        log.write(json.dumps(record) + "\n")

    print("steps:", train(loader, model, steps=120, after_step=after_step))
    log.close()
