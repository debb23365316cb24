"""The experiment ``stepdoctor run --experiments`` runs in the job's thread after warm-up:
data-only and compute-only throughput with the job's own loader, model and batch, then the
verdict. Unsafe cases are skipped with the reason.

The experiments print nothing: what they are doing goes to a ``progress`` callback (one line of
text at a time) that the caller supplies; ``stepdoctor run`` writes it to stderr.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stepdoctor.collect.hooks.trigger import ExperimentObjects
from stepdoctor.experiments.budgets import DEFAULT_BUDGET_S
from stepdoctor.experiments.throughput import compute_only, data_only, verdict

__all__ = ["DEFAULT_BUDGET_S", "make_run_experiment"]


def make_run_experiment(
    budget_s: float = DEFAULT_BUDGET_S, *, progress: Callable[[str], None] | None = None
) -> Callable[[ExperimentObjects], tuple[list[Any], list[str]]]:
    """Return the callback for ``ExperimentTrigger``: half the budget for each experiment.

    Args:
        budget_s: longest pause of the job, in seconds, for both experiments together.
        progress: called with one line of text as each experiment starts and with the
            measured rates when both are done (while the job is paused); None: silent.
    """
    say = progress or (lambda _: None)

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
        say(f"data-only throughput (<= {half:.0f} s)")
        data = data_only(loader, budget_s=half)
        say(f"compute-only throughput (<= {half:.0f} s)")
        with torch.enable_grad():
            compute = compute_only(objects.model, objects.batch, budget_s=half)
        if not data.batches:
            notes.append("data-only experiment: " + (data.note or "no batch timed"))
            return [], notes
        say(
            f"measured after step {objects.steps_before}: data-only "
            f"{data.batches_per_sec:,.1f} batches/s, compute-only "
            f"{compute.batches_per_sec:,.1f} batches/s; the job resumes"
        )
        return [verdict(data, compute)], notes

    return run
