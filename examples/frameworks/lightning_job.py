"""A small Lightning job (an MLP on random features, built from code: no downloads).

``LIGHTNING_FAULT=callback``: a callback that, after every batch, walks all the model's weights
element by element in Python to log their statistics (the planted slow callback).
``LIGHTNING_STEPS``: optimizer steps (default 150). ``LIGHTNING_DEVICES``: CPU processes
(``strategy="ddp"`` when more than one). ``LIGHTNING_ACCUMULATE``: ``accumulate_grad_batches``.
``LIGHTNING_WATCH=FOLDER``: the job watches itself with ``StepdoctorCallback`` (its record in
FOLDER, its report as JSON in FOLDER/report.json), for a run without ``stepdoctor run``.
``LIGHTNING_PROFILER``: the Trainer's own profiler (``simple``, ``advanced``).
The batches are indexed whole (a ``BatchSampler``), as stepdoctor advises for in-memory data.
"""

import os

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    RandomSampler,
    SequentialSampler,
    TensorDataset,
)

FAULT = os.environ.get("LIGHTNING_FAULT", "")
STEPS = int(os.environ.get("LIGHTNING_STEPS", "150"))
DEVICES = int(os.environ.get("LIGHTNING_DEVICES", "1"))
ACCUMULATE = int(os.environ.get("LIGHTNING_ACCUMULATE", "1"))
WATCH = os.environ.get("LIGHTNING_WATCH", "")
PROFILER = os.environ.get("LIGHTNING_PROFILER") or None
FEATURES, BATCH = 256, 128


class Classifier(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(FEATURES, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
        )

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], index: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], index: int) -> None:
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


class WeightStats(pl.Callback):
    """Logs the model's mean absolute weight, summed in Python (the slow way)."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:  # type: ignore[no-untyped-def]
        weights = torch.cat([p.detach().flatten() for p in pl_module.parameters()]).tolist()
        total = 0.0
        for w in weights:
            total += abs(w)
        pl_module.log("weight_abs_mean", total / len(weights))


def main() -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(BATCH * 100, FEATURES), torch.randint(0, 10, (BATCH * 100,)))
    train = DataLoader(
        data, sampler=BatchSampler(RandomSampler(data), BATCH, False), batch_size=None
    )
    held_out = TensorDataset(torch.randn(BATCH * 4, FEATURES), torch.randint(0, 10, (BATCH * 4,)))
    val = DataLoader(
        held_out, sampler=BatchSampler(SequentialSampler(held_out), BATCH, False), batch_size=None
    )
    callbacks: list[pl.Callback] = [WeightStats()] if FAULT == "callback" else []
    if WATCH:
        from stepdoctor.integrations.lightning import kit

        callbacks.append(
            kit()[1](out_dir=WATCH, json_path=os.path.join(WATCH, "report.json"), report=False)
        )
    trainer = pl.Trainer(
        max_steps=STEPS,
        accelerator="cpu",
        devices=DEVICES,
        strategy="ddp" if DEVICES > 1 else "auto",
        accumulate_grad_batches=ACCUMULATE,
        profiler=PROFILER,
        callbacks=callbacks,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(Classifier(), train, val)


if __name__ == "__main__":
    main()
