"""Findings told in the terms of the framework that ran the loop (Lightning, the Hugging Face
Trainer, Keras), when its integration noted it (the ``framework`` env fact and its settings,
``stepdoctor.integrations``); and DL4J, whose logs ``stepdoctor logs`` reads (a JVM job: the
generic fixes, in PyTorch's terms, are replaced, not added to).

The rules find the same time wherever the loop comes from; only the fix differs: a
``TrainingArguments`` argument instead of a DataLoader's, ``Trainer(log_every_n_steps=...)``
instead of ``if step % 100 == 0``. ``in_framework_terms`` adds that sentence (and a snippet
in the framework's own call) to the findings it applies to, and names the framework's hooks
that took the time between steps.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from stepdoctor.model import NEW_ITERATOR, Evidence, Finding, Fix, HookTime, Phase, RunRecord
from stepdoctor.rules._facts import keras_compiled
from stepdoctor.rules.slow_callbacks import WAITS_TITLE

__all__ = [
    "FRAMEWORK_NAMES",
    "ITERATOR_SHARE",
    "KERAS_LOOP_SHARE",
    "framework_of",
    "in_framework_terms",
    "slowest_hooks",
]

#: The frameworks' names as the user knows them.
FRAMEWORK_NAMES = {
    "lightning": "Lightning",
    "transformers": "the Hugging Face Trainer",
    "keras": "Keras",
    "tensorflow": "TensorFlow",
    "dl4j": "DL4J",
}
#: Hooks named in the evidence of the time between steps: the slowest few, from this share of
#: the hooks' time (a callback's hooks it does not override are still called, for nothing).
HOOKS_SHOWN = 3
HOOK_SHOWN_SHARE = 0.01
#: What the rules' generic fixes say, read back for the framework's own call.
_WORKERS = re.compile(r"num_workers=(\d+)")
_BATCH = re.compile(r"batch_size=(\d+)")
#: Progress bars redrawn every batch, and how each framework makes them redraw less.
_PROGRESS_FIXES = {
    "TQDMProgressBar": (
        "redraw it less often, or not at all in batch jobs.",
        "trainer = L.Trainer(..., callbacks=[TQDMProgressBar(refresh_rate=50)])",
    ),
    "RichProgressBar": (
        "redraw it less often, or not at all in batch jobs.",
        "trainer = L.Trainer(..., callbacks=[RichProgressBar(refresh_rate=50)])",
    ),
    "ProgressCallback": (
        "turn it off in batch jobs (disable_tqdm=True).",
        "TrainingArguments(..., disable_tqdm=True)",
    ),
    "NotebookProgressCallback": (
        "turn it off in batch jobs (disable_tqdm=True).",
        "TrainingArguments(..., disable_tqdm=True)",
    ),
}
#: A logging hook's name, per framework (``stepdoctor.integrations``).
_LOGGING_HOOKS = {
    "lightning": "logging (log_metrics)",
    "transformers": "Trainer.log (logging_steps)",
}


def framework_of(record: RunRecord) -> str:
    """The framework that ran the loop (``lightning``, ``transformers``, ``keras``), or
    ``""``."""
    value = record.env_value("framework")
    return value if isinstance(value, str) and value in FRAMEWORK_NAMES else ""


def slowest_hooks(record: RunRecord, phase: str) -> list[HookTime]:
    """The framework's hooks whose time was counted in ``phase``, slowest first."""
    return sorted(
        (h for h in record.hooks if h.phase == phase and h.total_ns > 0),
        key=lambda h: -h.total_ns,
    )


def in_framework_terms(record: RunRecord, findings: Sequence[Finding]) -> list[Finding]:
    """``findings`` with their fixes also told in the loop's framework's terms."""
    framework = framework_of(record)
    if not framework:
        return list(findings)
    if framework == "dl4j":
        return [_dl4j(record, f) for f in findings]
    translate = {
        "input-bound": _workers,
        "slow-callbacks": _between_steps,
        "checkpoint-stalls": _checkpoints,
        "small-batch": _batch,
        "frequent-evaluation": _evaluation,
        "float64": _float64,
        "competing-processes": _competing,
    }
    out = []
    for finding in findings:
        how = translate.get(finding.rule)
        out.append(how(record, framework, finding) if how else finding)
    return out


def _setting(record: RunRecord, framework: str, name: str) -> object:
    return record.env_value(f"{framework}.{name}")


def _told(finding: Finding, sentence: str, snippet: str | None) -> Finding:
    fix = finding.fix
    summary = f"{fix.summary} {sentence}" if fix is not None else sentence
    return dataclasses.replace(
        finding,
        fix=Fix(summary=summary, snippet=snippet or (fix.snippet if fix else None)),
    )


def _number(pattern: re.Pattern[str], fix: Fix | None) -> str | None:
    """The count the generic fix's code suggests (its snippet: the summary also quotes the
    job's own settings), when it suggests one above 0."""
    if fix is None or not fix.snippet:
        return None
    found = pattern.search(fix.snippet)
    return found.group(1) if found and int(found.group(1)) > 0 else None


def _workers(record: RunRecord, framework: str, finding: Finding) -> Finding:
    if framework == "keras":
        return _keras_input(record, finding)
    if framework == "tensorflow":
        return _instead(finding, *_tf_data(record, "tensorflow"))
    workers = _number(_WORKERS, finding.fix)
    builds_loader = finding.fix is not None and "DataLoader(" in (finding.fix.snippet or "")
    if framework == "transformers" and workers is None and builds_loader:
        return _instead(
            finding,
            "The Trainer makes the DataLoader from the data set and data_collator you give "
            "it: make the data set's samples (or the collator's batches) cheaper, prepared "
            "once ahead of training (datasets' map(..., batched=True)), and set its loader's "
            "settings in TrainingArguments.",
            "train_dataset = train_dataset.map(prepare, batched=True)  # once, before training\n"
            "TrainingArguments(..., dataloader_num_workers=2, dataloader_persistent_workers=True)",
        )
    if workers is None:
        return finding
    if framework == "transformers":
        now = _setting(record, framework, "dataloader_num_workers")
        return _told(
            finding,
            f"The Trainer makes the DataLoader: set its workers in TrainingArguments "
            f"(dataloader_num_workers is {now}).",
            f"TrainingArguments(..., dataloader_num_workers={workers},\n"
            "                  dataloader_persistent_workers=True)",
        )
    if framework == "lightning":
        return _told(
            finding,
            "In Lightning the DataLoader is the one your LightningModule's or DataModule's "
            "train_dataloader() returns (or the one given to fit): set num_workers there.",
            None,
        )
    return finding


#: Input-bound in Keras's terms, by what fit() was given (``integrations.keras.data_kind``):
#: what the user can change in their own call (Keras builds the loop's batches itself from
#: arrays, a tf.data pipeline or a PyDataset), replacing the generic DataLoader fix.
_KERAS_INPUT = {
    "arrays": (
        "fit() was given arrays: Keras slices them into batches itself, so there is no "
        "DataLoader of yours to change. Its slicing per batch is the wait: give fit() larger "
        "batches (batch_size), or, for per-sample work, a keras.utils.PyDataset whose "
        "__getitem__ returns a whole batch, with workers.",
        "model.fit(x, y, batch_size=512, ...)",
    ),
    "PyDataset": (
        "fit() was given a keras.utils.PyDataset: make its __getitem__ (a whole batch) "
        "cheaper, and let Keras prepare batches ahead in workers: pass workers= and "
        "use_multiprocessing=True (for Python work) to its constructor.",
        "class Batches(keras.utils.PyDataset):\n"
        "    def __init__(self, ..., **kwargs):\n"
        "        super().__init__(workers=4, use_multiprocessing=True, **kwargs)",
    ),
    "tf.data": (
        "fit() was given a tf.data pipeline: run its map in parallel "
        "(num_parallel_calls=tf.data.AUTOTUNE), batch before a vectorised map, cache what "
        "does not change between epochs, and end it with prefetch(tf.data.AUTOTUNE).",
        "ds = ds.map(prepare, num_parallel_calls=tf.data.AUTOTUNE)"
        ".cache().batch(256).prefetch(tf.data.AUTOTUNE)",
    ),
    "generator": (
        "fit() was given a Python generator: it makes one batch at a time, on one thread "
        "(Keras's loader on torch, tf.data's on TensorFlow), however many cores the machine "
        "has. Turn it into a keras.utils.PyDataset (a whole batch per __getitem__) with "
        "workers, or prepare the data once ahead of training.",
        "class Batches(keras.utils.PyDataset):\n"
        "    def __getitem__(self, i): ...  # batch i\n"
        "model.fit(Batches(workers=4, use_multiprocessing=True))",
    ),
}


def _keras_input(record: RunRecord, finding: Finding) -> Finding:
    """The input wait in Keras's terms: the generic fix stands where fit() was given the job's
    own torch DataLoader; else it is replaced by what fit()'s data can change."""
    given = _setting(record, "keras", "data")
    if given == "DataLoader":
        return _told(
            finding, "fit() was given this DataLoader: change it where you build it.", None
        )
    # the DataLoader's settings in the evidence are of the one Keras built on the torch
    # backend, not of one in the job's code: said so
    finding = dataclasses.replace(
        finding,
        evidence=tuple(
            dataclasses.replace(e, metric=f"Keras's own {e.metric}")
            if e.metric.startswith("DataLoader ")
            else e
            for e in finding.evidence
        ),
    )
    said = _tf_data(record, "keras") if given == "tf.data" else _KERAS_INPUT.get(str(given))
    if said is None:
        return _instead(
            finding,
            "Keras makes the batches from what fit() was given: make each batch cheaper to "
            "produce there, or give fit() a keras.utils.PyDataset with workers.",
            "model.fit(Batches(workers=4, use_multiprocessing=True))",
        )
    return _instead(finding, *said)


def _on_tensorflow(record: RunRecord, framework: str) -> bool:
    """Whether the loop runs TensorFlow's (or JAX's) compiled steps: a hand-written TensorFlow
    loop, or Keras on a backend other than torch."""
    return framework == "tensorflow" or (framework == "keras" and keras_compiled(record))


def _tf_data(record: RunRecord, framework: str) -> tuple[str, str]:
    """The tf.data pipeline's fix from its stages as the framework's integration read them
    (``integrations/_tfdata.describe``; ``framework``: ``keras``, its fit's, or
    ``tensorflow``, a hand-written loop's): the stages that run Python, those applied one
    element at a time, a map per sample, no cache, no prefetch; the general advice where the
    pipeline was not read."""
    pipeline = _setting(record, framework, "pipeline")
    if not isinstance(pipeline, str):
        summary, snippet = _KERAS_INPUT["tf.data"]
        if framework != "keras":
            summary = summary.replace(
                "fit() was given a tf.data pipeline", "In its tf.data pipeline"
            )
        return summary, snippet
    python = _setting(record, framework, "pipeline_python")
    sequential = _setting(record, framework, "pipeline_sequential")
    said = [
        f"fit() was given the tf.data pipeline {pipeline}."
        if framework == "keras"
        else f"The loop's batches come from the tf.data pipeline {pipeline}."
    ]
    code = []
    iterators = _new_iterators(record)
    if iterators is not None:
        calls, mean_ms, share = iterators
        said.append(
            f"Most of the wait ({share:.0%}) is the loop making a new iterator of it, "
            f"{calls} times ({mean_ms:.0f} ms each: each epoch's for-loop over the dataset): "
            "tf.data rewrites the pipeline's graph (with the arrays given to "
            "from_tensor_slices in it) and fills its buffers again. Make one iterator for "
            "the whole run, of the dataset repeated, and take an epoch's batches from it."
        )
        code += [
            "batches = iter(dataset.repeat())",
            "for epoch in range(epochs):",
            "    for _ in range(steps_per_epoch):",
            "        train_step(*next(batches))",
        ]
    if isinstance(python, str) and "(Python, parallel)" in pipeline:
        said.append(
            f"Its {python} runs Python for each element, in parallel already, but on "
            "tf.data's threads, one per core by default: a call asleep on storage holds "
            "one, and Python's calls take turns under its lock. For reads, a larger pool "
            "and as many calls in flight (a private thread pool of 16 and "
            "num_parallel_calls=16); for computation, TensorFlow ops, vectorised over a "
            "batch (batch first, then map)."
        )
        code += [
            "options = tf.data.Options()",
            "options.threading.private_threadpool_size = 16",
            "ds = ds.map(read, num_parallel_calls=16).with_options(options)",
        ]
    elif isinstance(python, str):
        said.append(
            f"Its {python} runs Python for each element (py_function, numpy_function or "
            "a generator), one call at a time under Python's lock however many cores the "
            "machine has: write it in TensorFlow ops, so tf.data runs it on every core, "
            "vectorised over a batch where it can (batch first, then map); what must stay "
            "in Python gains from num_parallel_calls only where it waits on I/O, with a "
            "tf.data thread pool larger than the cores (options.threading."
            "private_threadpool_size)."
        )
        code.append("ds = ds.batch(256).map(prepare_batch_in_tf_ops,")
        code.append("                       num_parallel_calls=tf.data.AUTOTUNE)")
    if isinstance(sequential, str) and sequential != python:
        said.append(
            f"Its {sequential} handles one element at a time: pass "
            "num_parallel_calls=tf.data.AUTOTUNE."
        )
        if not code:
            code.append("ds = ds.map(prepare, num_parallel_calls=tf.data.AUTOTUNE)")
    if _setting(record, framework, "pipeline_map_before_batch") is True and not python:
        said.append("Its map works per sample: batch first and map over whole batches.")
    works = any(word in pipeline for word in _PIPELINE_WORK)
    if _setting(record, framework, "pipeline_cache") is False and works:
        said.append("Cache what does not change between epochs (.cache() after it).")
    if _setting(record, framework, "pipeline_prefetch") is False:
        said.append(
            "End it with .prefetch(tf.data.AUTOTUNE), so the next batches are made while "
            "the step computes."
        )
        code.append("ds = ds.prefetch(tf.data.AUTOTUNE)")
    if len(said) == 1 and framework == "tensorflow":
        # nothing to change in the pipeline: the wait is the eager iterator's own call
        said.append(
            "It is already parallel and prefetched: what is left is the loop's own call of "
            "the iterator, once a batch from Python, and a new iterator each epoch; larger "
            "batches (where the model trains as well with them) make both rarer."
        )
        code = ["dataset = dataset.batch(512)  # fewer, larger batches"]
    return " ".join(said), "\n".join(code) or _KERAS_INPUT["tf.data"][1]


#: The share of a hand-written loop's data wait in making new iterators from which the fix is
#: one iterator for the run: most of it.
ITERATOR_SHARE = 0.5


def _new_iterators(record: RunRecord) -> tuple[int, float, float] | None:
    """The new iterators a hand-written TensorFlow loop made of its pipeline: their count,
    mean time (ms) and share of the steps' data wait, where they are ``ITERATOR_SHARE`` of it
    or more (None otherwise)."""
    made = next((h for h in record.hooks if h.name == NEW_ITERATOR and h.calls), None)
    waited = sum(s.phase(Phase.DATA_WAIT) for s in record.steps)
    if made is None or not waited or made.total_ns < ITERATOR_SHARE * waited:
        return None
    return made.calls, made.total_ns / made.calls / 1e6, min(1.0, made.total_ns / waited)


#: Stages of a tf.data pipeline whose work ``cache()`` saves on later epochs: functions
#: applied to its elements, files read (``_tfdata.describe``'s stage names).
_PIPELINE_WORK = ("map", "interleave", "from_generator", "filter", "Dataset")


def _instead(finding: Finding, summary: str, snippet: str | None) -> Finding:
    """``finding`` with its fix replaced: the generic one names objects the framework built."""
    return dataclasses.replace(finding, fix=Fix(summary=summary, snippet=snippet))


def _dl4j(record: RunRecord, finding: Finding) -> Finding:
    """A finding on a DL4J job, its fix in DL4J's terms (its performance guide's steps): the
    run rules that apply to a DL4J log's steps are input-bound, small-batch and
    step-outliers; gc-pauses (Python's collector) does not run on it."""
    if finding.rule == "input-bound":
        return dataclasses.replace(
            finding,
            fix=Fix(
                summary=(
                    "Prepare batches ahead of fit() on background threads and find what makes "
                    "ETL slow (the DL4J performance guide, step 3): wrap the iterator in an "
                    "AsyncDataSetIterator (fit() does so itself only when the iterator's "
                    "asyncSupported() is true) with a queue of several batches; for "
                    "expensive ETL, pre-process once and save the DataSets "
                    "(DataSet.save, then ExistingMiniBatchDataSetIterator); read from local "
                    "storage rather than a network file system."
                ),
                snippet=(
                    "DataSetIterator train = new AsyncDataSetIterator(iterator, 8);\n"
                    "net.fit(train, epochs);"
                ),
            ),
        )
    if finding.rule == "small-batch":
        size = _number(_BATCH, finding.fix) or "64"
        return dataclasses.replace(
            finding,
            fix=Fix(
                summary=(
                    "Use a larger minibatch: the batch size of the DataSetIterator given to "
                    f"fit() (try {size}), with the learning rate adjusted to it."
                ),
                snippet=f"DataSetIterator train = new MnistDataSetIterator({size}, true, 12345);",
            ),
        )
    if finding.rule == "step-outliers":
        return dataclasses.replace(
            finding,
            fix=Fix(
                summary=(
                    "Look at what the slow iterations did: a GC log of the job (-Xlog:gc*, or "
                    "-XX:+PrintGCDetails -XX:+PrintGCDateStamps on JDK 8) shows whether "
                    "collections fell in them; slow ETL shows in PerformanceListener's ETL; "
                    "listeners and checkpoints (ModelSerializer) run between iterations."
                ),
            ),
        )
    return finding


#: At or above this share of the time between steps outside the user's timed callbacks,
#: Keras's own loop is what takes it (on TensorFlow or JAX a Python loop runs once a batch
#: around the compiled step): the fix is fewer calls, not cheaper callbacks.
KERAS_LOOP_SHARE = 0.5


def _keras_loop_share(record: RunRecord) -> float:
    """The share of the time between steps that is not in the callbacks the Keras
    integration timed: Keras's own loop (0 on the torch backend, where torch's hooks split
    its steps and its loop's time falls in them)."""
    if not keras_compiled(record):
        return 0.0
    between = sum(
        s.phase_ns.get(Phase.CALLBACKS.value, 0) + s.phase_ns.get(Phase.OTHER.value, 0)
        for s in record.steps
    )
    hooks = sum(h.total_ns for h in slowest_hooks(record, Phase.CALLBACKS.value))
    return max(0.0, 1.0 - hooks / between) if between else 0.0


def _between_steps(record: RunRecord, framework: str, finding: Finding) -> Finding:
    told = _between_steps_told(record, framework, finding)
    if _on_tensorflow(record, framework):
        return _in_tensorflows_words(told)
    return told


#: torch's calls in the generic between-steps finding, and TensorFlow's for the same.
_TF_WORDS = (
    (".item()/.cpu() calls", ".numpy() / float() of tensors"),
    ("read them (.item()) rarely", "read them (.numpy()) rarely"),
    ("log(loss.item())", "log(float(loss))"),
)


def _in_tensorflows_words(finding: Finding) -> Finding:
    """``finding`` with torch's tensor calls said as TensorFlow's."""

    def said(text: str) -> str:
        for torch_words, tf_words in _TF_WORDS:
            text = text.replace(torch_words, tf_words)
        return text

    fix = finding.fix
    return dataclasses.replace(
        finding,
        explanation=said(finding.explanation),
        fix=None
        if fix is None
        else Fix(summary=said(fix.summary), snippet=fix.snippet and said(fix.snippet)),
    )


def _between_steps_told(record: RunRecord, framework: str, finding: Finding) -> Finding:
    python = _setting(record, framework, "pipeline_python")
    if (
        framework == "tensorflow"
        and isinstance(python, str)
        and finding.title.startswith(WAITS_TITLE)
    ):
        # the loop's thread waited off the CPU between steps while tf.data's thread ran the
        # pipeline's Python: a wait for Python's lock, which the pipeline's fix removes
        summary, snippet = _tf_data(record, framework)
        return dataclasses.replace(
            finding,
            explanation=f"{finding.explanation} Meanwhile the input pipeline's {python} runs "
            "Python on tf.data's own thread: where that Python computes (rather than sleeps "
            "on I/O, which lets go of it), the loop waits for Python's lock (the GIL) that "
            "thread holds.",
            fix=Fix(summary=summary, snippet=snippet),
        )
    if framework == "keras":
        loop = _keras_loop_share(record)
        if loop >= KERAS_LOOP_SHARE:
            per_call = _setting(record, framework, "steps_per_execution")
            return _instead(
                finding,
                f"Most of it ({loop:.0%}) is Keras's own work around each call of its "
                f"compiled train step (steps_per_execution is {per_call}), not your "
                "callbacks': fit() runs a Python loop once a call. Run many batches per "
                "call: compile(..., steps_per_execution=N); batch hooks of callbacks are "
                "then called once per N batches.",
                "model.compile(..., steps_per_execution=32)",
            )
    hooks = slowest_hooks(record, Phase.CALLBACKS.value)
    if not hooks:
        return finding
    total = sum(h.total_ns for h in hooks)
    shown = ", ".join(
        f"{h.name} {h.total_ns / h.calls / 1e6:.2f} ms a call x {h.calls} "
        f"({h.total_ns / total:.0%})"
        for i, h in enumerate(hooks[:HOOKS_SHOWN])
        if i == 0 or h.total_ns >= HOOK_SHOWN_SHARE * total
    )
    evidence = Evidence(
        metric=f"{FRAMEWORK_NAMES[framework]}'s hooks, slowest first",
        value=shown,
        source=f"{framework} integration",
    )
    finding = dataclasses.replace(finding, evidence=(*finding.evidence, evidence))
    top = hooks[0]
    if top.name == _LOGGING_HOOKS.get(framework):
        if framework == "lightning":
            every = _setting(record, framework, "log_every_n_steps")
            return _told(
                finding,
                f"Most of it is Lightning writing the logged metrics to the loggers, every "
                f"{every} step(s): log less often (Trainer(log_every_n_steps=50), its default), "
                "and log per epoch what needs no step-by-step curve "
                "(self.log(..., on_step=False, on_epoch=True)).",
                "trainer = L.Trainer(..., log_every_n_steps=50)",
            )
        every = _setting(record, framework, "logging_steps")
        return _told(
            finding,
            f"Most of it is the Trainer's logging, every {every} step(s): log less often "
            "(TrainingArguments(logging_steps=500), its default) and report to fewer "
            "integrations (report_to).",
            "TrainingArguments(..., logging_steps=500)",
        )
    owner, _, hook = top.name.rpartition(".")
    progress = _PROGRESS_FIXES.get(owner)
    if progress is not None:
        return _told(
            finding,
            f"Most of it is the progress bar ({top.name}, {top.total_ns / total:.0%} of the "
            f"hooks' time): {progress[0]}",
            progress[1],
        )
    if framework == "lightning":
        guard = "if batch_idx % 50 == 0:"
    elif framework == "transformers":
        guard = "if state.global_step % 50 == 0:"
    else:
        guard = "if batch % 50 == 0:"
    return _told(
        finding,
        f"Most of it is {top.name} ({top.total_ns / total:.0%} of the hooks' time): make it "
        f"cheaper (on tensors, not element by element in Python), or do its work every N "
        f"steps ({guard} at the top of {hook or top.name}).",
        f"def {hook or 'on_train_batch_end'}(self, ...):\n    {guard}\n        ...  # the work",
    )


def _checkpoints(record: RunRecord, framework: str, finding: Finding) -> Finding:
    if framework == "lightning":
        every = _setting(record, framework, "checkpoint_every_n_train_steps")
        return _told(
            finding,
            f"Lightning saves from its ModelCheckpoint callback (every_n_train_steps is "
            f"{every}): save every few hundred steps or per epoch.",
            "ModelCheckpoint(every_n_train_steps=1000)  # or every_n_epochs=1",
        )
    if framework == "transformers":
        strategy = _setting(record, framework, "save_strategy")
        steps = _setting(record, framework, "save_steps")
        return _told(
            finding,
            f"The Trainer saves by save_strategy={strategy!r} and save_steps={steps}: save "
            "less often, and keep fewer checkpoints (save_total_limit).",
            'TrainingArguments(..., save_strategy="steps", save_steps=1000, save_total_limit=2)',
        )
    return _told(
        finding,
        "Keras saves from its ModelCheckpoint callback: save per epoch, not per batch.",
        'keras.callbacks.ModelCheckpoint(path, save_freq="epoch")',
    )


def _batch(record: RunRecord, framework: str, finding: Finding) -> Finding:
    size = _number(_BATCH, finding.fix) or "64"
    if framework == "keras":
        now = _setting(record, framework, "batch_size")
        return _told(
            finding,
            "In Keras the batch is fit()'s batch_size" + (f" (now {now})." if now else "."),
            f"model.fit(x, y, batch_size={size}, ...)",
        )
    if framework == "tensorflow":
        return _instead(
            finding,
            f"{finding.fix.summary if finding.fix else ''} The loop's batch is its tf.data "
            "pipeline's batch() size.".strip(),
            f"dataset = dataset.batch({size})",
        )
    if framework == "transformers":
        now = _setting(record, framework, "per_device_train_batch_size")
        return _told(
            finding,
            f"With the Trainer the batch is per_device_train_batch_size (now {now}); "
            "gradient_accumulation_steps only adds micro-batches of the same size.",
            f"TrainingArguments(..., per_device_train_batch_size={size})",
        )
    return _told(
        finding,
        "In Lightning the batch is the batch_size of the DataLoader your train_dataloader() "
        "returns.",
        None,
    )


def _evaluation(record: RunRecord, framework: str, finding: Finding) -> Finding:
    if framework == "lightning":
        interval = _setting(record, framework, "val_check_interval")
        return _told(
            finding,
            f"Lightning validates every val_check_interval={interval} of an epoch (or every "
            "that many batches): validate once an epoch, less often (check_val_every_n_epoch), "
            "or on fewer batches (limit_val_batches).",
            "trainer = L.Trainer(..., val_check_interval=1.0, limit_val_batches=0.25)",
        )
    if framework == "transformers":
        steps = _setting(record, framework, "eval_steps")
        strategy = _setting(record, framework, "eval_strategy")
        every = (
            f"every eval_steps={steps} steps"
            if steps is not None and strategy == "steps"
            else f"by eval_strategy={strategy!r}"
        )
        return _told(
            finding,
            f"The Trainer evaluates {every}: evaluate less often "
            '(eval_strategy="epoch", or a larger eval_steps) or on a subset of eval_dataset.',
            'TrainingArguments(..., eval_strategy="steps", eval_steps=1000)',
        )
    freq = _setting(record, framework, "validation_freq")
    return _told(
        finding,
        f"Keras validates after every validation_freq={freq or 1} epoch(s): validate less "
        "often, or on fewer batches (validation_steps).",
        "model.fit(..., validation_freq=5, validation_steps=50)",
    )


def _float64(record: RunRecord, framework: str, finding: Finding) -> Finding:
    """Double precision where the framework sets it: Lightning's ``precision``, Keras's
    ``floatx`` and dtype policy, the Trainer's model as loaded; else where the job's own code
    converts the model or makes its data."""
    if framework == "lightning":
        precision = str(_setting(record, framework, "precision") or "")
        if "64" in precision:
            return _instead(
                finding,
                f"The Trainer runs the model in float64 because its precision is "
                f'{precision!r}: use precision="32-true" (or "bf16-mixed" where the '
                "hardware has bfloat16), and keep the data in float32.",
                'trainer = L.Trainer(..., precision="32-true")',
            )
        return _told(
            finding,
            f"In Lightning (precision {precision!r}) the float64 comes from your own code: a "
            "self.double() or float64 parameters in your LightningModule, or float64 arrays "
            "in the data set your DataModule's train_dataloader() reads.",
            None,
        )
    if framework == "transformers":
        return _told(
            finding,
            "The Trainer trains the model in the dtype it was loaded or converted to: load it "
            "with torch_dtype=torch.float32 and drop any model.double() (bf16=True in "
            "TrainingArguments for mixed precision where the hardware has bfloat16).",
            "model = AutoModel.from_pretrained(name, torch_dtype=torch.float32)",
        )
    floatx = _setting(record, framework, "floatx")
    policy = _setting(record, framework, "dtype_policy")
    if floatx == "float64" or policy == "float64":
        return _instead(
            finding,
            f"Keras builds its layers in float64 because its floatx is {floatx!r} (dtype "
            f"policy {policy!r}): set floatx to float32 before the model is built, or give "
            'the layers dtype="float32"; Keras casts float64 inputs to the layers\' dtype.',
            'keras.config.set_floatx("float32")  # before the model is built',
        )
    return _instead(
        finding,
        f'Keras\'s floatx is {floatx!r}: the float64 comes from layers given dtype="float64" '
        "in your model: give them float32 (Keras casts float64 inputs to the layers' dtype).",
        'keras.layers.Dense(units, dtype="float32")',
    )


def _competing(record: RunRecord, framework: str, finding: Finding) -> Finding:
    """Keras on TensorFlow or JAX sizes no torch thread pool: the generic fix's last clause,
    in its library's terms."""
    if not _on_tensorflow(record, framework):
        return finding
    fix = finding.fix
    summary = fix.summary.replace(
        "size torch.set_num_threads and num_workers to them",
        "size TensorFlow's thread pools to them "
        "(tf.config.threading.set_intra_op_parallelism_threads and "
        "set_inter_op_parallelism_threads, before the model is built)",
    )
    return dataclasses.replace(finding, fix=Fix(summary=summary, snippet=fix.snippet))
