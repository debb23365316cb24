"""Headline numbers of a run, with warm-up steps left out of the shares."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from stepdoctor.model import (
    WARMUP_SAMPLES,
    Phase,
    RunRecord,
    StepTiming,
    Summary,
    measured_steps,
    profiled_steps,
    training_steps,
)
from stepdoctor.rules._facts import keras_compiled

__all__ = [
    "GPU_RUNAHEAD_S",
    "WARMUP_MAX_SHARE",
    "WARMUP_SAMPLES",  # (re-exported: the rules' warm-up is the model's)
    "batch_from_model",
    "measured_steps",  # (re-exported: the model's, so that the plots judge the same steps)
    "profiled_steps",  # (re-exported, as measured_steps)
    "split_warmup",
    "step_basis",
    "summarize",
]

#: Steps treated as warm-up when the batch size is unknown.
WARMUP_STEPS_UNKNOWN_BATCH = 3
#: Never drop more than this share of a short run's steps as warm-up.
WARMUP_MAX_SHARE = 0.2


def split_warmup(steps: Sequence[StepTiming]) -> int:
    """Return how many leading steps are warm-up (at least one when there are two or more)."""
    n = len(steps)
    if n < 2:
        return 0
    seen = 0
    count = 0
    for step in steps:
        if step.batch_size is None:
            count = WARMUP_STEPS_UNKNOWN_BATCH
            break
        count += 1
        seen += step.batch_size
        if seen >= WARMUP_SAMPLES:
            break
    return max(1, min(count, int(n * WARMUP_MAX_SHARE)))


def summarize(record: RunRecord, profiled: frozenset[int] | None = None) -> Summary:
    """Compute the summary of ``record``; ``profiled``: its ``profiled_steps`` where the caller
    has them already (found here otherwise)."""
    steps = training_steps(record.steps)
    warm = split_warmup(steps)
    if profiled is None:
        profiled = profiled_steps(record)
    measured = measured_steps(record.steps, warm, profiled)
    total_ns = sum(s.duration_ns for s in measured)
    shares: dict[str, float] = {}
    if total_ns:
        for step in measured:
            for name, ns in step.phase_ns.items():
                if name != _EVALUATION:  # not part of the steps' training time
                    shares[name] = shares.get(name, 0.0) + ns
        shares = {
            name: ns / total_ns
            for name, ns in sorted(shares.items(), key=lambda kv: _phase_order(kv[0]))
        }
    fallback, batch_note = batch_from_model(record) if measured else (None, "")
    sizes = [fallback if s.batch_size is None else s.batch_size for s in measured]
    samples = None if not measured or any(b is None for b in sizes) else sum(b or 0 for b in sizes)
    if fallback is None or all(s.batch_size is not None for s in measured):
        batch_note = ""
    seconds = total_ns / 1e9
    warm_samples = sum(s.batch_size or 0 for s in steps[:warm])
    note = ""
    if warm:
        note = f"first {warm} step(s)" + (f" ({warm_samples} samples)" if warm_samples else "")
        note += " left out as warm-up"
    eval_s, eval_share, eval_calls = _evaluation(record.steps, steps)
    first, last = (min(profiled), max(profiled)) if profiled else (0, 0)
    whats = " and ".join(dict.fromkeys(p.label for p in record.profiled))
    profiled_note = (
        f"steps {first}-{last} ran under stepdoctor's {whats}: left out of these figures and "
        "of the diagnosis"
        if profiled
        else ""
    )
    framework = str(record.env_value("framework") or "")
    micro = _median_count(steps, "micro_batches")
    closure = _median_count(steps, "closure_passes")
    if framework == "lightning" and closure:  # its automatic optimization's closure
        micro, closure = (micro or 0) + closure, 0.0
    return Summary(
        steps=len(steps),
        warmup_steps=warm,
        wall_s=_wall_s(record),
        measured_s=seconds,
        samples=samples,
        samples_per_sec=None if samples is None or not seconds else samples / seconds,
        batches_per_sec=len(measured) / seconds if seconds else None,
        mean_step_ms=total_ns / len(measured) / 1e6 if measured else None,
        phase_share=shares,
        gc_share=sum(s.gc_pause_ns for s in measured) / total_ns if total_ns else 0.0,
        warmup_note=note,
        profiled_note=profiled_note,
        monitor_cpu_share=_monitor_share(record),
        kind=_kind(record.steps),
        batch_note=batch_note,
        timing_note=_timing_note(record, seconds) if measured else "",
        step_basis=step_basis(
            record.steps,
            framework=framework,
            per_call=_batches_per_call(record, framework),
            step_function=str(record.env_value("tensorflow.step_function") or ""),
        ),
        micro_batches_per_step=micro,
        closure_passes_per_step=closure,
        evaluation_s=eval_s,
        evaluation_share=eval_share,
        evaluation_calls=eval_calls,
    )


#: The launch queue lets the host run this many seconds (or more) ahead of a busy GPU: a run
#: measured for less may read samples/s high (an 8,192-wide float32 MLP on an H200: 135,569
#: samples/s over 0.6 s of host-timed steps, 59,840 timed with the GPU synchronised).
GPU_RUNAHEAD_S = 10.0


def _timing_note(record: RunRecord, seconds: float) -> str:
    """On a job whose models run on a CUDA GPU, that its step times are the host's."""
    if not any("cuda" in m.devices for m in record.models):
        return ""
    note = (
        "step times are the host's: the GPU runs its kernels behind it, and the rules that "
        "judge the GPU read NVML"
    )
    if seconds < GPU_RUNAHEAD_S:
        note += (
            f"; over {seconds:.1f} s of steps the host may have run ahead of the GPU, so "
            "samples/s may read high"
        )
    return note


#: Words for how a step was found (``StepTiming.boundary``).
_BASIS = {
    "optimizer": "one step per optimizer step",
    "backward": (
        "no optimizer step was seen: one step per forward/backward pass, from one training "
        "pass to the next (parameters updated by hand)"
    ),
    "explicit": "one step per doc.step() call",
    "model": "no backward pass was seen (inference): one step per call of the model",
    "dl4j": (
        "one step per PerformanceListener line of the DL4J log (an iteration, ETL included; "
        "one in N with a listener frequency of N)"
    ),
}


def _batches_per_call(record: RunRecord, framework: str) -> int:
    """Batches Keras runs in each call of its compiled train function (``steps_per_execution``,
    on TensorFlow or JAX: on torch the hooks see each batch); 1 elsewhere."""
    if framework != "keras" or not keras_compiled(record):
        return 1
    value = record.env_value("keras.steps_per_execution")
    return value if isinstance(value, int) and value > 1 else 1


def step_basis(
    steps: Sequence[StepTiming], *, framework: str = "", per_call: int = 1, step_function: str = ""
) -> str:
    """How ``steps`` were found, in words: the boundary of the job's steps, its micro-batches
    or closure passes per step, and calls taken as inference before training started.
    Lightning's automatic optimization runs the last micro-batch's forward and backward
    inside ``optimizer.step`` (a closure): a pass, not a closure optimizer's. ``per_call``:
    the batches of Keras's fit in each step (its ``steps_per_execution``); ``step_function``:
    the tf.function a hand-written TensorFlow loop's steps call (none: an eager loop)."""
    work = training_steps(tuple(steps))
    if not work:
        return ""
    words = _BASIS.get(work[-1].boundary, work[-1].boundary)
    if work[-1].boundary == "explicit" and framework == "tensorflow":
        words = (
            f"one step per call of the tf.function {step_function}() that applies the "
            "gradients (its graph calls the optimizer)"
            if step_function
            else "one step per optimizer.apply_gradients call of the eager loop"
        )
    if work[-1].boundary == "explicit" and framework == "keras":
        words = "one step per batch of Keras's fit (from its on_train_batch_begin to the next)"
        if any(s.phase_ns.get(Phase.TRAIN_STEP.value) for s in work):
            words += "; the compiled train step fetches its batch inside its call"
        if per_call > 1:
            words = (
                f"one step per call of Keras's train function, {per_call} batches each "
                "(steps_per_execution; from one on_train_batch_begin to the next)"
            )
    micro = _median_count(work, "micro_batches") or 0
    closure = _median_count(work, "closure_passes") or 0
    if framework == "lightning":
        micro, closure = micro + closure, 0
        words += " (Lightning runs training_step and backward inside optimizer.step)"
    if micro > 1 and work[-1].boundary != "backward":
        words += f", {micro:g} micro-batches each (gradient accumulation)"
    if closure:
        words += f", {closure:g} forward/backward passes inside each (a closure optimizer)"
    before = len(steps) - len(work)
    if before:
        words += f"; {before} model calls before training started are counted as evaluation"
    return words


#: Recurrent layers (and nn.Transformer's) take (time, batch, features) unless built with
#: ``batch_first=True`` (torch.nn docs): their model's batch is its input's second dimension.
_SEQUENCE_FIRST_KINDS = frozenset({"lstm", "gru", "rnn"})


def batch_from_model(record: RunRecord) -> tuple[int | None, str]:
    """The batch size the job's first model was called with, for steps whose batches came
    from no DataLoader (sliced tensors, a generator): the first dimension of its first
    input, or the second where its recurrent layers are sequence-first."""
    for model in record.models:
        shape = model.input_shape
        if not shape:
            continue
        seq_first = any(
            layer.kind in _SEQUENCE_FIRST_KINDS and layer.batch_first is False
            for layer in model.layers
        )
        dim = 1 if seq_first and len(shape) >= 2 else 0
        batch = shape[dim]
        if batch <= 0:
            return None, ""
        where = "second dimension (its recurrent layers take time first)" if dim else "first one"
        return batch, (
            f"batch size {batch} from {model.class_name}'s input {tuple(shape)}, its {where}: "
            "no DataLoader batch was seen"
        )
    return None, ""


def _kind(steps: Sequence[StepTiming]) -> str:
    if not steps:
        return ""
    return "inference" if steps[-1].boundary == "model" else "training"


def _median_count(steps: Sequence[StepTiming], name: str) -> float | None:
    counts = [getattr(s, name) for s in steps]
    return statistics.median(counts) if counts else None


def _evaluation(
    steps: tuple[StepTiming, ...], work: tuple[StepTiming, ...]
) -> tuple[float, float, int]:
    """Evaluation between training steps, inside steps and as the model calls taken as
    inference before training started: ``(seconds, share of the steps' wall time, calls)``."""
    before = [s for s in steps if s.boundary == "model"] if len(work) != len(steps) else []
    eval_ns = sum(s.phase_ns.get(_EVALUATION, 0) for s in work) + sum(s.wall_ns for s in before)
    wall_ns = sum(s.wall_ns for s in steps)
    calls = sum(s.eval_calls for s in work) + len(before)
    return eval_ns / 1e9, eval_ns / wall_ns if wall_ns > 0 else 0.0, calls


def _wall_s(record: RunRecord) -> float:
    ends = [record.meta.clock_origin_ns]
    if record.end is not None:
        ends.append(record.end.t_ns)
    if record.steps:
        ends.append(record.steps[-1].end_ns)
    if record.system:
        ends.append(record.system[-1].t_ns)
    return (max(ends) - record.meta.clock_origin_ns) / 1e9


_ORDER = {p.value: i for i, p in enumerate(Phase)}
_EVALUATION = Phase.EVALUATION.value


def _phase_order(name: str) -> tuple[int, str]:
    return (_ORDER.get(name, len(_ORDER)), name)


def _monitor_share(record: RunRecord) -> float | None:
    if record.end is None or record.end.monitor_cpu_ns is None:
        return None
    wall_ns = record.end.t_ns - record.meta.clock_origin_ns
    return record.end.monitor_cpu_ns / wall_ns if wall_ns > 0 else None
