"""The experiment ``stepdoctor run --experiments`` runs in the job's thread after warm-up:
data-only and compute-only throughput with the job's own loader, model and batch, then the
verdict. Unsafe cases are skipped with the reason."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from stepdoctor.collect.hooks.trigger import ExperimentObjects
from stepdoctor.experiments.throughput import compute_only, data_only, verdict

__all__ = ["DEFAULT_BUDGET_S", "make_run_experiment"]

#: Total time the experiments may pause the job (the issue's --experiment-budget default).
DEFAULT_BUDGET_S = 30.0


def make_run_experiment(
    budget_s: float = DEFAULT_BUDGET_S, *, show_progress: bool = True
) -> Callable[[ExperimentObjects], tuple[list[Any], list[str]]]:
    """Return the callback for ``ExperimentTrigger``: half the budget for each experiment."""

    def run(objects: ExperimentObjects) -> tuple[list[Any], list[str]]:
        import torch

        notes: list[str] = []
        distributed = getattr(torch, "distributed", None)
        if distributed is not None and distributed.is_available() and distributed.is_initialized():
            return [], ["experiments skipped: a distributed job cannot pause one rank alone"]
        loader = objects.loader
        if loader is None:
            return [], ["experiments skipped: the batches did not come from a DataLoader"]
        dataset = getattr(loader, "dataset", None)
        if isinstance(dataset, torch.utils.data.IterableDataset):
            return [], [
                "experiments skipped: an IterableDataset may not restart (a second pass "
                "could consume or repeat the job's data)"
            ]
        half = budget_s / 2
        console = Console(stderr=True)
        with Progress(
            SpinnerColumn(),
            TextColumn("stepdoctor: {task.description}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not show_progress or not sys.stderr.isatty(),
        ) as progress:
            task = progress.add_task(f"data-only throughput (<= {half:.0f} s)", total=None)
            data = data_only(loader, budget_s=half)
            progress.update(task, description=f"compute-only throughput (<= {half:.0f} s)")
            with torch.enable_grad():
                compute = compute_only(objects.model, objects.batch, budget_s=half)
        if not data.batches:
            notes.append("data-only experiment: " + (data.note or "no batch timed"))
            return [], notes
        console.print(
            f"stepdoctor: measured after step {objects.steps_before}: data-only "
            f"{data.batches_per_sec:,.1f} batches/s, compute-only "
            f"{compute.batches_per_sec:,.1f} batches/s; the job resumes",
            highlight=False,
        )
        return [verdict(data, compute)], notes

    return run
