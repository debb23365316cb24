"""Names of the phases a training step is split into (see DESIGN.md, "Phases of a step")."""

from __future__ import annotations

from stepdoctor.model._strenum import StrEnum

__all__ = ["Phase"]


class Phase(StrEnum):
    """A built-in phase of a step. Users may add their own phases by any other name.

    ``gc`` pauses are not a phase: they overlap the others and are kept per step apart.
    """

    DATA_WAIT = "data_wait"
    H2D = "h2d"
    FORWARD = "forward"
    BACKWARD = "backward"
    OPTIMIZER = "optimizer"
    TRAIN_STEP = "train_step"
    """A framework's whole training step in one compiled call whose parts the hooks cannot
    see apart: Keras on TensorFlow or JAX calls its compiled ``train_function`` once a batch,
    which takes the batch from its tf.data pipeline (the fetch in it), runs forward, backward
    and the update inside the graph; a hand-written TensorFlow loop's ``tf.function`` step
    runs forward, backward and the update (its batch fetched before, as ``data_wait``).
    Training compute."""
    SYNC = "sync"
    CALLBACKS = "callbacks"
    CHECKPOINT = "checkpoint"
    EVALUATION = "evaluation"
    """Evaluation between training steps: the trained model called without autograd
    (``no_grad``/``inference_mode``), with its data waits and the work around those calls
    until training resumes. Not part of a step's training time (``StepTiming.duration_ns``)."""
    OTHER = "other"
