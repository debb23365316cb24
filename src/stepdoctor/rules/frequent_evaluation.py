"""frequent-evaluation: evaluation inside training takes a large share of its time.

Detects: the share of the measured steps' wall time (evaluation included: a step's
``duration_ns`` leaves it out) in the ``evaluation`` phase: validation run
inside training (Lightning's validation loop, the Hugging Face Trainer's ``evaluate``, Keras's
validation in ``fit``, or a plain loop's no-grad calls of the model it trains), and how often
it runs. Info when a plain loop's calls without autograd were all in train mode (sampling or
rollouts, more likely than validation).
Evidence: that share, how many evaluations, every how many steps, their mean duration.
Fix: evaluate less often or on fewer batches (in the framework's own settings, where a
framework ran the loop: ``rules/framework_terms.py``).
"""

from __future__ import annotations

import itertools
import statistics

from stepdoctor.model import Evidence, Finding, Fix, Phase, Severity, Speedup
from stepdoctor.rules._severity import grade
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule

__all__ = [
    "CRITICAL_SHARE",
    "LESS_OFTEN",
    "MIN_EVALUATIONS",
    "WARNING_SHARE",
    "frequent_evaluation",
]

#: Graded as slow-callbacks' time between steps (20% / 40%: the TF performance-analysis
#: article's post-processing case): time in which the model does not train. Validation a run
#: needs costs a few percent (examples/frameworks/lightning_job.py validating 4 batches once an
#: epoch of 100: 1%).
WARNING_SHARE = 0.20
CRITICAL_SHARE = 0.40
#: The modelled speed-up: the same evaluation run this many times less often.
LESS_OFTEN = 4
#: Evaluations needed to speak of how often (one in the measured steps is no period).
MIN_EVALUATIONS = 2


def _train_mode_only(ctx: RuleContext) -> bool:
    """Whether every call of the models without autograd was in train mode: a plain loop's
    "evaluation" that never called ``model.eval()`` is more likely sampling or rollouts (a
    GAN's samples, a policy's actions) than validation."""
    stats = ctx.record.concurrency
    no_grad = sum(s.calls - s.grad_calls for s in stats)
    in_eval_mode = sum(s.calls - s.train_mode_calls for s in stats)
    return bool(stats) and no_grad > 0 and in_eval_mode == 0


@rule(id="frequent-evaluation", title="Evaluation takes much of the training time")
def frequent_evaluation(ctx: RuleContext) -> list[Finding]:
    """Flag evaluation taking 20% of the measured steps' time or more."""
    total = sum(s.wall_ns for s in ctx.steps)
    evaluating = [s for s in ctx.steps if s.phase(Phase.EVALUATION)]
    eval_ns = sum(s.phase(Phase.EVALUATION) for s in evaluating)
    share = eval_ns / total if total else 0.0
    rung = grade(share, warning=WARNING_SHARE, critical=CRITICAL_SHARE)
    if rung is None or len(evaluating) < MIN_EVALUATIONS:
        return []
    gaps = [b.index - a.index for a, b in itertools.pairwise(evaluating)]
    period = statistics.median(gaps)
    every = f"every {period:g} steps"
    mean_ms = eval_ns / len(evaluating) / 1e6
    kept = share / LESS_OFTEN
    in_train_mode = not ctx.record.env_value("framework") and _train_mode_only(ctx)
    return [
        Finding(
            rule="frequent-evaluation",
            severity=Severity.INFO if in_train_mode else rung.severity,
            title=f"Evaluation takes {share:.0%} of the training time",
            explanation=(
                f"The job evaluated {len(evaluating)} times in {len(ctx.steps)} steps ({every}), "
                f"{mean_ms:.0f} ms each: {share:.0%} of the time, in which nothing trains."
                + (
                    " These were calls of the trained model without autograd but in train "
                    "mode (model.eval() not called): sampling or rollouts the job needs, not "
                    "validation, if so."
                    if in_train_mode
                    else ""
                )
            ),
            evidence=(
                Evidence(
                    metric="evaluation share of step time",
                    value=round(share, 4),
                    unit="share",
                    threshold=WARNING_SHARE,
                    source="step phases",
                ),
                Evidence(metric="evaluations", value=len(evaluating), source="step phases"),
                Evidence(metric="every", value=every, source="step indices"),
                Evidence(
                    metric="mean evaluation",
                    value=round(mean_ms, 1),
                    unit="ms",
                    source="step phases",
                ),
            ),
            speedup=Speedup(
                factor=1.0 / (1.0 - share + kept),
                basis=f"evaluation {LESS_OFTEN}x less often: 1 / (1 - {share:.2f} + {kept:.2f})",
            ),
            fix=Fix(
                summary=(
                    "Evaluate less often (every few hundred steps or once an epoch) or on a "
                    "fixed subset of the validation data; what needs a curve per step (the "
                    "training loss) needs no evaluation pass."
                ),
                snippet="if step % 1000 == 0:\n    evaluate(model, val_subset)",
            ),
        )
    ]
