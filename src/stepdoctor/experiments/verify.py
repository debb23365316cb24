"""``stepdoctor run --verify``: after the job ends, try the top findings' fixes with its own
objects and measure what each gives the whole job.

The job has finished when this runs, so nothing here can change its results; what it touches
(weights, gradients, modes, RNG, the thread count) is put back all the same. Each trial times
the part of the step the fix changes, the job as it is and the job changed, interleaved
(``repeats`` rounds, the order alternating), and turns each round's ratio into the whole job's
speed-up with the job's own phase times: only the changed part is replaced, the rest of the step
stays as measured. The trials share a time budget; what does not fit is skipped with a note.

Trials (``TRIALS``: which finding each one verifies):

- ``small-batch``: forward + backward of the job's batch against the same batch repeated x2,
  x4, x8 and up to the batch the finding suggests; per-step costs are spread over the larger
  batch, the data per sample stays;
- ``float64``: forward + backward of a float32 copy of the model and batch;
- ``thread-oversubscription``: forward + backward at each thread count from 1 to the cores;
- ``input-bound``: the loader alone against the same data set indexed a batch at a time (a
  ``BatchSampler`` as sampler) and, where the loader waits on storage or a core is spare,
  against more workers;
- ``autograd-in-inference``: the forward as the job ran it (autograd on, its train/eval mode)
  against ``model.eval()`` under ``torch.inference_mode()``;
- ``shared-model-threads``: as many calls of the batch as the threads made at once against
  one call of those batches together.
"""

from __future__ import annotations

from collections.abc import Callable

from stepdoctor.collect.hooks.trigger import ExperimentObjects
from stepdoctor.experiments._trials import TRIAL, JobStep
from stepdoctor.experiments.budgets import DEFAULT_SHARE
from stepdoctor.model import FixTrial, Report

__all__ = ["DEFAULT_SHARE", "MIN_BUDGET_S", "REPEATS", "TRIALS", "verify"]

#: Below this budget no trial can time enough steps to be worth its noise.
MIN_BUDGET_S = 0.5
#: Rounds of (as is, changed) per trial; the figure is their median.
REPEATS = 3
#: Rules whose fixes a trial measures.
TRIALS = (
    "input-bound",
    "small-batch",
    "float64",
    "thread-oversubscription",
    "autograd-in-inference",
    "shared-model-threads",
)


def verify(
    objects: ExperimentObjects,
    report: Report,
    *,
    budget_s: float,
    repeats: int = REPEATS,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[FixTrial], list[str]]:
    """Measure the fixes of ``report``'s findings that a trial covers; return the trials and
    notes (what was skipped, and why)."""
    import torch

    say = progress or (lambda _: None)
    wanted = [f for f in report.findings if f.rule in TRIALS]
    if not wanted:
        return [], []
    if budget_s < MIN_BUDGET_S:
        return [], [f"fixes not verified: a budget of {budget_s:.1f} s is too short to time them"]
    job = JobStep.of(report)
    if job is None:
        return [], ["fixes not verified: the report has no step times to scale"]
    per_trial = budget_s / len(wanted)
    trials: list[FixTrial] = []
    notes: list[str] = []
    threads = torch.get_num_threads()
    try:
        for finding in wanted:
            say(f"verifying {finding.rule} (<= {per_trial:.1f} s)")
            try:
                got, said = TRIAL[finding.rule](objects, finding, job, per_trial, repeats)
            except Exception as exc:  # a trial that fails says so; the report goes on
                got, said = [], [f"{finding.rule}: the trial failed: {type(exc).__name__}: {exc}"]
            trials.extend(got)
            notes.extend(said)
    finally:
        torch.set_num_threads(threads)
    return trials, notes
