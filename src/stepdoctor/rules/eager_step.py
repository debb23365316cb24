"""eager-step: a hand-written TensorFlow loop whose step runs eagerly, op by op from Python.

Detects: a GradientTape loop (``integrations/tensorflow.py``) whose steps end at eager
``apply_gradients`` calls: no ``tf.function`` compiles its forward, backward and update.
Evidence: the steps, their mean time, the shares of forward, backward and the update.
Fix: ``@tf.function`` on the step (TensorFlow's guide to ``tf.function``: a graph runs the
step's ops without dispatching each from Python, most worth it for many small ops).
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, Phase, Severity, Speedup
from stepdoctor.rules._facts import tensorflow_loop
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule

__all__ = ["eager_step"]

#: The phases of an eager step that a compiled one runs as one graph.
_COMPILED_PHASES = (Phase.FORWARD, Phase.BACKWARD, Phase.OPTIMIZER)


@rule(id="eager-step", title="The training step runs eagerly")
def eager_step(ctx: RuleContext) -> list[Finding]:
    """Flag (info) a hand-written TensorFlow loop whose step is not a ``tf.function``."""
    record = ctx.record
    if not tensorflow_loop(record) or record.env_value("tensorflow.eager") is not True:
        return []
    compiled = ctx.share(*_COMPILED_PHASES)
    step_ms = ctx.summary.mean_step_ms or 0.0
    return [
        Finding(
            rule="eager-step",
            severity=Severity.INFO,
            title="The training step runs eagerly, op by op from Python",
            explanation=(
                f"Each step ({step_ms:.1f} ms) runs its forward, backward and update eagerly: "
                "every operation is dispatched from Python one at a time, with no "
                f"tf.function to run them as one graph; they take {compiled:.0%} of the "
                "step. A graph skips the dispatch and lets TensorFlow fuse and schedule the "
                "ops, most worth it for a step of many small ones (TensorFlow's guide to "
                "tf.function)."
            ),
            evidence=(
                Evidence(
                    metric="step",
                    value="eager (apply_gradients called from Python)",
                    source="tensorflow integration",
                ),
                Evidence(
                    metric="forward, backward and update share of a step",
                    value=round(compiled, 4),
                    unit="share",
                    source="step phases",
                ),
                Evidence(
                    metric="mean step time", value=round(step_ms, 3), unit="ms", source="steps"
                ),
            ),
            speedup=Speedup.none(
                "not estimated: the gain depends on how many small operations the step runs; "
                "run the job with the step compiled and compare"
            ),
            fix=Fix(
                summary=(
                    "Compile the step: decorate the function that computes the loss, its "
                    "gradients and applies them with @tf.function (its batch as arguments, "
                    "shapes fixed to avoid retracing)."
                ),
                snippet=(
                    "@tf.function\n"
                    "def train_step(x, y):\n"
                    "    with tf.GradientTape() as tape:\n"
                    "        loss = loss_fn(y, model(x, training=True))\n"
                    "    grads = tape.gradient(loss, model.trainable_weights)\n"
                    "    optimizer.apply_gradients(zip(grads, model.trainable_weights))"
                ),
            ),
        )
    ]
