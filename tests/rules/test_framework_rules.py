"""Findings in a framework's own terms (rules/framework_terms.py) and frequent-evaluation."""

from __future__ import annotations

import dataclasses

from stepdoctor.model import (
    NEW_ITERATOR,
    ConcurrencyStat,
    HookTime,
    LoaderInfo,
    ModelInfo,
    Severity,
)
from stepdoctor.report import build_report
from stepdoctor.rules import RuleContext
from stepdoctor.rules.frequent_evaluation import frequent_evaluation
from tests.builders import env, record, samples, steps


def _hook(name: str, ms: float, calls: int = 100) -> HookTime:
    return HookTime(name=name, phase="callbacks", calls=calls, total_ns=int(ms * 1e6))


def _findings(rec: object) -> dict[str, object]:
    return {f.rule: f for f in build_report(rec).findings}  # type: ignore[arg-type]


def test_a_slow_lightning_callback_is_named_with_a_guard_in_its_hook() -> None:
    s = steps(100, phases_ms={"forward": 10, "backward": 10, "callbacks": 12})
    hooks = (_hook("WeightStats.on_train_batch_end", 1100), _hook("logging (log_metrics)", 40))
    rec = record(s, facts=env(framework="lightning", lightning__log_every_n_steps=50), hooks=hooks)
    f = _findings(rec)["slow-callbacks"]
    assert "WeightStats.on_train_batch_end" in f.fix.summary  # type: ignore[attr-defined]
    assert "if batch_idx % 50 == 0:" in f.fix.summary  # type: ignore[attr-defined]
    ev = {e.metric: e.value for e in f.evidence}  # type: ignore[attr-defined]
    assert str(ev["Lightning's hooks, slowest first"]).startswith(
        "WeightStats.on_train_batch_end 11.00 ms a call x 100 (96%)"
    )


def test_logging_on_top_is_told_as_lightnings_and_the_trainers_logging_setting() -> None:
    s = steps(100, phases_ms={"forward": 10, "backward": 10, "callbacks": 12})
    lightning = record(s, facts=env(framework="lightning", lightning__log_every_n_steps=1),
                       hooks=(_hook("logging (log_metrics)", 1100),))  # fmt: skip
    f = _findings(lightning)["slow-callbacks"]
    assert "every 1 step(s)" in f.fix.summary and "log_every_n_steps=50" in f.fix.snippet  # type: ignore[attr-defined]
    hf = record(s, facts=env(framework="transformers", transformers__logging_steps=1),
                hooks=(_hook("Trainer.log (logging_steps)", 1100),))  # fmt: skip
    g = _findings(hf)["slow-callbacks"]
    assert "logging_steps=500" in g.fix.snippet  # type: ignore[attr-defined]


def test_a_plain_loop_keeps_the_generic_fix() -> None:
    s = steps(100, phases_ms={"forward": 10, "backward": 10, "callbacks": 12})
    f = _findings(record(s, hooks=(_hook("X.on_train_batch_end", 1100),)))["slow-callbacks"]
    assert "X.on_train_batch_end" not in f.fix.summary  # type: ignore[attr-defined]


def test_evaluation_every_few_steps_is_a_finding_told_in_the_frameworks_setting() -> None:
    s = steps(100, phases_ms={"forward": 10, "backward": 10}, every={2: {"evaluation": 30}})
    (f,) = frequent_evaluation(RuleContext(record(s)))
    assert f.severity is Severity.CRITICAL  # 15 of every 35 ms
    ev = {e.metric: e.value for e in f.evidence}
    assert ev["every"] == "every 2 steps"
    assert f.speedup.factor > 1.0
    facts = env(
        framework="transformers", transformers__eval_steps=2, transformers__eval_strategy="steps"
    )
    hf = record(s, facts=facts)
    g = _findings(hf)["frequent-evaluation"]
    assert "eval_steps=2" in g.fix.summary  # type: ignore[attr-defined]
    keras = record(s, facts=env(framework="keras"))
    assert "validation_freq" in _findings(keras)["frequent-evaluation"].fix.summary  # type: ignore[attr-defined]


def test_evaluation_once_an_epoch_is_silent() -> None:
    s = steps(100, phases_ms={"forward": 10, "backward": 10}, every={50: {"evaluation": 40}})
    assert frequent_evaluation(RuleContext(record(s))) == []


def test_one_evaluation_is_no_period() -> None:
    s = steps(100, phases_ms={"forward": 10, "backward": 10}, every={70: {"evaluation": 900}})
    assert frequent_evaluation(RuleContext(record(s))) == []


def test_calls_without_autograd_in_train_mode_are_sampling_more_likely_than_validation() -> None:
    s = steps(100, phases_ms={"forward": 10, "backward": 10}, every={2: {"evaluation": 30}})
    rollouts = ConcurrencyStat(
        model_id=1, class_name="Policy", calls=200, threads=1, max_concurrent=1,
        concurrent_calls=0, grad_calls=100, train_mode_calls=200,
    )  # fmt: skip
    (f,) = frequent_evaluation(RuleContext(record(s, concurrency=(rollouts,))))
    assert f.severity is Severity.INFO and "train mode" in f.explanation
    validation = dataclasses.replace(rollouts, train_mode_calls=100)  # model.eval() called
    (g,) = frequent_evaluation(RuleContext(record(s, concurrency=(validation,))))
    assert g.severity is Severity.CRITICAL


def test_workers_and_checkpoints_are_told_in_the_trainers_arguments() -> None:
    # a decoding data set read in the main process beside a spare core: workers are the fix
    s = steps(100, phases_ms={"data_wait": 40, "forward": 30, "backward": 30})
    loader = LoaderInfo(loader_id=1, num_workers=0, batch_size=32, dataset_type="Decoded")
    facts = env(framework="transformers", transformers__dataloader_num_workers=0,
                cpu__affinity=8, torch__num_threads=2)  # fmt: skip
    f = _findings(record(s, cores=8, loaders=[loader], facts=facts))["input-bound"]
    assert "dataloader_num_workers is 0" in f.fix.summary  # type: ignore[attr-defined]
    assert "TrainingArguments(..., dataloader_num_workers=" in f.fix.snippet  # type: ignore[attr-defined]
    saving = steps(100, phases_ms={"forward": 10, "backward": 10}, every={5: {"checkpoint": 40}})
    lightning = env(framework="lightning", lightning__checkpoint_every_n_train_steps=5)
    g = _findings(record(saving, facts=lightning))["checkpoint-stalls"]
    assert "every_n_train_steps is 5" in g.fix.summary  # type: ignore[attr-defined]
    hf = env(
        framework="transformers", transformers__save_strategy="steps", transformers__save_steps=5
    )
    h = _findings(record(saving, facts=hf))["checkpoint-stalls"]
    assert "save_steps=5" in h.fix.summary and "save_total_limit" in h.fix.snippet  # type: ignore[attr-defined]


def test_input_waits_in_keras_are_told_by_what_fit_was_given() -> None:
    """Keras builds the batches from arrays, a PyDataset or a tf.data pipeline: the fix is in
    that (no DataLoader the user never built); a torch DataLoader given to fit() is the
    job's own, and keeps the generic fix."""
    s = steps(100, phases_ms={"data_wait": 40, "forward": 30, "backward": 30})
    loader = LoaderInfo(loader_id=1, num_workers=0, batch_size=32, dataset_type="Decoded")

    def fix(data: str) -> object:
        facts = env(framework="keras", keras__data=data, cpu__affinity=8, torch__num_threads=2)
        return _findings(record(s, cores=8, loaders=[loader], facts=facts))["input-bound"].fix  # type: ignore[attr-defined]

    said = {data: fix(data) for data in ("arrays", "PyDataset", "tf.data", "generator", "Odd")}
    for data, told in said.items():
        assert "DataLoader(" not in told.summary + (told.snippet or ""), (data, told)  # type: ignore[attr-defined]
    assert said["arrays"].summary.startswith("fit() was given arrays")  # type: ignore[attr-defined]
    assert "use_multiprocessing=True" in said["PyDataset"].snippet  # type: ignore[attr-defined]
    assert "num_parallel_calls=tf.data.AUTOTUNE" in said["tf.data"].snippet  # type: ignore[attr-defined]
    facts = env(framework="keras", keras__data="arrays", cpu__affinity=8, torch__num_threads=2)
    told = _findings(record(s, cores=8, loaders=[loader], facts=facts))["input-bound"]
    metrics = [e.metric for e in told.evidence]  # type: ignore[attr-defined]
    assert (
        "Keras's own DataLoader num_workers" in metrics and "DataLoader num_workers" not in metrics
    )
    own = fix("DataLoader")
    assert "DataLoader(" in own.snippet and "change it where you build it" in own.summary  # type: ignore[attr-defined]


def test_the_trainers_loader_is_changed_through_its_arguments_not_a_dataloader_call() -> None:
    """Per-sample Python work in a loader that yields batches fast: the generic fix builds a
    DataLoader with a BatchSampler, which the Trainer's user never calls."""
    s = steps(200, phases_ms={"data_wait": 6, "forward": 10, "backward": 10})
    loader = LoaderInfo(loader_id=1, num_workers=0, batch_size=64, dataset_type="TensorDataset")
    plain = _findings(record(s, cores=2, loaders=[loader]))["input-bound"]
    assert "BatchSampler" in plain.fix.snippet  # type: ignore[attr-defined]  # the premise
    facts = env(framework="transformers", transformers__dataloader_num_workers=0)
    told = _findings(record(s, cores=2, loaders=[loader], facts=facts))["input-bound"]
    assert "DataLoader(" not in told.fix.summary + told.fix.snippet  # type: ignore[attr-defined]
    assert "TrainingArguments(" in told.fix.snippet  # type: ignore[attr-defined]


def _double_model() -> ModelInfo:
    return ModelInfo(model_id=1, class_name="Net", param_count=10, param_bytes=80,
                     param_dtypes=("torch.float64",))  # fmt: skip


def test_float64_is_told_where_each_framework_sets_it() -> None:
    """Lightning's precision, Keras's floatx, the Trainer's model as loaded: the fix names
    the setting that made the model float64, or says the job's own code did."""
    s = steps(100, phases_ms={"forward": 10, "backward": 10})
    models = (_double_model(),)

    def fix(**facts: object) -> tuple[str, str | None]:
        f = _findings(record(s, facts=env(**facts), models=models))["float64"]
        return f.fix.summary, f.fix.snippet  # type: ignore[attr-defined]

    summary, snippet = fix(framework="lightning", lightning__precision="64-true")
    assert "precision is '64-true'" in summary and snippet == (
        'trainer = L.Trainer(..., precision="32-true")'
    )
    assert "model.float()" not in summary  # replaced: the Trainer converts it
    summary, _ = fix(framework="lightning", lightning__precision="32-true")
    assert "model.float()" in summary and "from your own code" in summary
    summary, snippet = fix(
        framework="keras", keras__floatx="float64", keras__dtype_policy="float64"
    )
    assert "floatx is 'float64'" in summary and snippet is not None
    assert snippet.startswith('keras.config.set_floatx("float32")')
    summary, snippet = fix(framework="keras", keras__floatx="float32")
    assert 'dtype="float64"' in summary and snippet == 'keras.layers.Dense(units, dtype="float32")'
    summary, snippet = fix(framework="transformers")
    assert "torch_dtype=torch.float32" in summary and snippet is not None
    generic, _ = fix()
    assert generic.startswith("Convert the model with model.float()")


def test_keras_own_loop_between_steps_on_tensorflow_is_told_as_steps_per_execution() -> None:
    """On TensorFlow a Keras step is its compiled train function's call; the time between
    calls outside the callbacks timed is Keras's own loop: the fix is more batches per call.
    On torch the same time is the steps' own (torch's hooks split them): the generic fix."""
    s = steps(100, phases_ms={"train_step": 10, "other": 6, "callbacks": 1})
    hooks = (_hook("History.on_epoch_end", 100),)
    facts = {"framework": "keras", "keras__steps_per_execution": 1}
    tf = record(s, facts=env(**facts, keras__backend="tensorflow"), hooks=hooks)
    f = _findings(tf)["slow-callbacks"]
    assert f.fix.summary.startswith("Most of it (86%) is Keras's own work")  # type: ignore[attr-defined]
    assert f.fix.snippet == "model.compile(..., steps_per_execution=32)"  # type: ignore[attr-defined]
    torch = record(s, facts=env(**facts, keras__backend="torch"), hooks=hooks)
    g = _findings(torch)["slow-callbacks"]
    assert "steps_per_execution" not in g.fix.summary  # type: ignore[attr-defined]
    # a callback that takes most of it is named, on TensorFlow too
    slow = (_hook("Stats.on_train_batch_end", 600),)
    named = record(s, facts=env(**facts, keras__backend="tensorflow"), hooks=slow)
    assert (
        "Most of it is Stats.on_train_batch_end" in _findings(named)["slow-callbacks"].fix.summary
    )  # type: ignore[attr-defined]


def test_keras_steps_of_several_batches_say_so() -> None:
    s = tuple(
        dataclasses.replace(x, boundary="explicit")
        for x in steps(100, phases_ms={"train_step": 10})
    )
    facts = env(framework="keras", keras__backend="tensorflow", keras__steps_per_execution=8)
    summary = build_report(record(s, facts=facts)).summary
    assert summary.step_basis.startswith("one step per call of Keras's train function, 8 batches")
    torch = env(framework="keras", keras__backend="torch", keras__steps_per_execution=8)
    assert build_report(record(s, facts=torch)).summary.step_basis.startswith(
        "one step per batch of Keras's fit"
    )


def test_competing_processes_on_tensorflow_size_its_thread_pools_not_torchs() -> None:
    s = steps(50, phases_ms={"train_step": 100})
    system = samples(s, job_cpu=200.0, other_cpu=200.0)
    facts = env(framework="keras", keras__backend="tensorflow")
    f = _findings(record(s, system=system, facts=facts))["competing-processes"]
    assert "torch" not in f.fix.summary  # type: ignore[attr-defined]
    assert "tf.config.threading.set_intra_op_parallelism_threads" in f.fix.summary  # type: ignore[attr-defined]


def _tf_loop(**pipeline: object) -> tuple[object, ...]:
    return env(framework="tensorflow", tensorflow__step_function="train_step", **pipeline)


def test_a_tf_loops_input_wait_is_told_by_its_pipelines_stages() -> None:
    """A hand-written TensorFlow loop's data wait: the fix names the pipeline's stages and
    what to change in them (no DataLoader): a Python map run one at a time, one already in
    parallel (its reads want more calls in flight), or nothing left to change in the
    pipeline (the eager iterator's own call: the epoch's loop compiled)."""
    s = steps(100, phases_ms={"data_wait": 40, "train_step": 60})

    def fix(**pipeline: object) -> object:
        return _findings(record(s, facts=_tf_loop(**pipeline)))["input-bound"].fix  # type: ignore[attr-defined]

    one_at_a_time = fix(
        tensorflow__pipeline="from_tensor_slices > map (Python) > batch(32)",
        tensorflow__pipeline_python="map", tensorflow__pipeline_sequential="map",
        tensorflow__pipeline_cache=False, tensorflow__pipeline_prefetch=False,
    )  # fmt: skip
    summary = one_at_a_time.summary  # type: ignore[attr-defined]
    assert summary.startswith(
        "The loop's batches come from the tf.data pipeline from_tensor_slices > map (Python)"
    )
    assert "write it in TensorFlow ops" in summary and ".prefetch(tf.data.AUTOTUNE)" in summary
    assert "DataLoader" not in summary + one_at_a_time.snippet  # type: ignore[attr-defined]
    parallel = fix(
        tensorflow__pipeline="range > map (Python, parallel) > batch(32) > prefetch",
        tensorflow__pipeline_python="map", tensorflow__pipeline_prefetch=True,
    )  # fmt: skip
    assert "in parallel already" in parallel.summary  # type: ignore[attr-defined]
    assert "options.threading.private_threadpool_size = 16" in parallel.snippet  # type: ignore[attr-defined]
    tuned = fix(
        tensorflow__pipeline="from_tensor_slices > batch(128) > prefetch",
        tensorflow__pipeline_cache=False, tensorflow__pipeline_prefetch=True,
    )  # fmt: skip
    assert "what is left is the loop's own call of the iterator" in tuned.summary  # type: ignore[attr-defined]
    assert "Cache" not in tuned.summary  # nothing in the pipeline for a cache to save  # type: ignore[attr-defined]
    assert tuned.snippet.startswith("dataset = dataset.batch(")  # type: ignore[attr-defined]
    # most of the wait in making each epoch's iterator: one iterator for the run
    made = HookTime(name=NEW_ITERATOR, phase="data_wait", calls=4, total_ns=int(3000 * 1e6))
    facts = _tf_loop(tensorflow__pipeline="from_tensor_slices > batch(128) > prefetch")
    anew = _findings(record(s, facts=facts, hooks=(made,)))["input-bound"].fix  # type: ignore[attr-defined]
    assert "Most of the wait (75%) is the loop making a new iterator of it, 4 times" in anew.summary
    assert anew.snippet.startswith("batches = iter(dataset.repeat())")


def test_a_tf_loop_waiting_between_steps_beside_a_python_pipeline_is_told_as_its_lock() -> None:
    """The loop's thread off the CPU between steps while tf.data's thread runs the pipeline's
    Python (a generator): it waits for Python's lock, and the fix is the pipeline's; without
    Python in the pipeline the wait keeps the generic fix (fetches in flight)."""
    s = steps(100, phases_ms={"data_wait": 2, "train_step": 10, "other": 30})
    system = samples(s)
    t0 = system[0].t_ns
    clocked = tuple(
        dataclasses.replace(x, main_thread_cpu_s=0.1 * (x.t_ns - t0) / 1e9) for x in system
    )
    facts = _tf_loop(
        tensorflow__pipeline="from_generator", tensorflow__pipeline_python="from_generator"
    )
    f = _findings(record(s, system=clocked, facts=facts))["slow-callbacks"]
    assert f.title.startswith("The loop waits between steps")  # type: ignore[attr-defined]
    assert "Python's lock (the GIL)" in f.explanation  # type: ignore[attr-defined]
    assert f.fix.summary.startswith(  # type: ignore[attr-defined]
        "The loop's batches come from the tf.data pipeline from_generator."
    )
    plain = _findings(record(s, system=clocked, facts=_tf_loop(tensorflow__pipeline="range")))
    assert plain["slow-callbacks"].fix.summary.startswith("Overlap the wait")  # type: ignore[attr-defined]


def test_work_between_a_tf_loops_steps_is_told_with_tensorflows_calls() -> None:
    s = steps(100, phases_ms={"train_step": 10, "other": 12})
    f = _findings(record(s, facts=_tf_loop()))["slow-callbacks"]
    said = f.explanation + f.fix.summary + (f.fix.snippet or "")  # type: ignore[attr-defined]
    assert ".item()" not in said and ".numpy()" in said and "log(float(loss))" in said
    torch = _findings(record(s))["slow-callbacks"]
    assert "log(loss.item())" in torch.fix.snippet  # type: ignore[attr-defined]


def test_a_tf_loops_steps_and_batches_are_told_in_tensorflows_terms() -> None:
    s = tuple(
        dataclasses.replace(x, boundary="explicit", batch_size=2)
        for x in steps(100, phases_ms={"forward": 1, "backward": 1, "optimizer": 3})
    )
    compiled = build_report(record(s, facts=_tf_loop()))
    assert compiled.summary.step_basis.startswith(
        "one step per call of the tf.function train_step()"
    )
    eager = build_report(record(s, facts=env(framework="tensorflow")))
    assert (
        eager.summary.step_basis == "one step per optimizer.apply_gradients call of the eager loop"
    )
    small = {f.rule: f for f in eager.findings}["small-batch"]
    assert small.fix.snippet == "dataset = dataset.batch(64)"
    assert "DataLoader" not in small.fix.summary
    # tune and --verify try their fixes on a torch model: none offered here; the same run
    # of a torch loop gets one
    long = tuple(
        dataclasses.replace(x, boundary="explicit", batch_size=2)
        for x in steps(100, phases_ms={"forward": 10, "backward": 10, "optimizer": 30})
    )
    ran = record(long, facts=env(framework="tensorflow"))
    ran = dataclasses.replace(ran, meta=dataclasses.replace(ran.meta, command=("train.py",)))
    assert build_report(ran).measure_with == ""
    torch_run = dataclasses.replace(ran, env=env(torch__version="2.13.0"))
    assert build_report(torch_run).measure_with == "stepdoctor tune --only batch train.py"


def test_an_eager_tf_loop_is_told_to_compile_its_step_and_a_compiled_one_is_not() -> None:
    s = steps(50, phases_ms={"forward": 4, "backward": 4, "optimizer": 2, "data_wait": 1})
    eager = _findings(record(s, facts=env(framework="tensorflow", tensorflow__eager=True)))
    f = eager["eager-step"]
    assert f.severity is Severity.INFO and f.speedup.kind.value == "none"  # type: ignore[attr-defined]
    assert f.fix.snippet.startswith("@tf.function")  # type: ignore[attr-defined]
    compiled = env(framework="tensorflow", tensorflow__eager=False)
    assert "eager-step" not in _findings(record(s, facts=compiled))
    assert "eager-step" not in _findings(record(s))  # a torch loop
