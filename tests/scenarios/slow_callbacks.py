"""Fault: every step logs per-sample outputs as JSON lines (heavy post-processing)."""

import json
import os
import tempfile

from _zoo import mlp, tensors, train
from torch.utils.data import DataLoader

if __name__ == "__main__":
    loader = DataLoader(tensors(), batch_size=64, shuffle=True)
    model = mlp()
    log = open(os.path.join(tempfile.mkdtemp(), "metrics.jsonl"), "w")

    def after_step(step: int, loss: object) -> None:
        weights = model[0].weight.detach()[:64].tolist()
        log.write(json.dumps({"step": step, "loss": float(loss), "w": weights}) + "\n")  # type: ignore[arg-type]

    print("steps:", train(loader, model, steps=200, after_step=after_step))
    log.close()
