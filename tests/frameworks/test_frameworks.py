"""Real CPU runs of Lightning, Hugging Face Trainer and Keras 3 jobs (small models built from
code or a config: no downloads) under ``stepdoctor run``, which installs each framework's
integration when the job imports it; and Lightning's callback used without ``run``.

Each framework: the steps counted as the framework counts them, the phases adding up to the
steps, a healthy job clean, a planted fault named on top in the framework's own terms.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from stepdoctor.model import (
    GENERATOR_WAIT,
    NEW_ITERATOR,
    PIPELINE_WAIT,
    PYDATASET_MADE,
    RunRecord,
)
from stepdoctor.record import load_run
from tests._machine import judged
from tests._zygote import stepdoctor_run
from tests.marks import needs_module
from tests.scenarios._verdicts import LOUD, about_the_job, saves_under_a_second, warmup_of

HERE = Path(__file__).parents[2] / "examples" / "frameworks"
pytestmark = pytest.mark.scenario


def _run(job: str, tmp_path: Path, **env: str) -> tuple[dict[str, object], RunRecord, Path]:
    """``stepdoctor run`` the job with ``env`` (forked from a process that has imported torch,
    ``tests/_zygote.py``; the framework is imported by the job): its JSON report, its record,
    its folder."""
    out, report = tmp_path / "run", tmp_path / "report.json"
    proc = stepdoctor_run(
        ["run", "--no-report", "--json", str(report), "--out", str(out), str(HERE / job)],
        timeout=300, cwd=tmp_path, env={**os.environ, "PYTHONWARNINGS": "ignore", **env},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(report.read_text()), load_run(out), out


def _phases_add_up(record: RunRecord) -> None:
    for step in record.steps:  # evaluation included (a step's duration_ns leaves it out)
        assert sum(step.phase_ns.values()) == pytest.approx(step.wall_ns, rel=0.01)


def _loud(report: dict[str, object], out: Path) -> list[str]:
    return [
        f"{f['rule']} {f['severity']}: {f['title']}"
        for f in about_the_job(report, out)
        if f["severity"] in LOUD
    ]


def _top(report: dict[str, object], out: Path) -> dict[str, object]:
    findings = about_the_job(report, out)
    assert findings, "no findings"
    return findings[0]


Run = tuple[dict[str, object], RunRecord, Path]


def _judged(
    job: str, tmp_path: Path, judge: Callable[[dict[str, object], Path], None], **env: str
) -> Run:
    """``_run`` the job and ``judge`` its report: again on a run alone if the verdict failed on
    a busy machine (``tests/_machine.py``)."""
    return judged(
        lambda folder: _run(job, folder, **env), lambda run: (run[2], warmup_of(run[0])),
        lambda run: judge(run[0], run[2]), tmp_path,
    )  # fmt: skip


def _clean(report: dict[str, object], out: Path) -> None:
    loud = _loud(report, out)
    assert not loud, loud


def _on_top(rule: str) -> Callable[[dict[str, object], Path], None]:
    """The planted rule's finding on top, loud; or info where its fix saves under a second
    of the run's steps (the job is short) and nothing about the job is louder."""

    def judge(report: dict[str, object], out: Path) -> None:
        top = _top(report, out)
        if saves_under_a_second(about_the_job(report, out), rule):
            assert top["rule"] == rule, top
            return
        assert top["rule"] == rule and top["severity"] in LOUD, top

    return judge


def _hooks(record: RunRecord) -> dict[str, int]:
    return {h.name: h.calls for h in record.hooks}


# -- Lightning --------------------------------------------------------------------------------


def test_lightning_job_is_watched_in_lightnings_terms_and_stays_clean(tmp_path: Path) -> None:
    report, record, _ = _judged(
        "lightning_job.py", tmp_path, _clean, LIGHTNING_ACCUMULATE="2", LIGHTNING_STEPS="60"
    )
    assert len(record.steps) == 60  # optimizer steps (max_steps), each of 2 batches
    summary = report["summary"]
    assert isinstance(summary, dict) and summary["micro_batches_per_step"] == 2
    assert "Lightning runs training_step and backward inside optimizer.step" in str(
        summary["step_basis"]
    )
    _phases_add_up(record)
    assert record.env_value("framework") == "lightning"
    assert record.env_value("lightning.accumulate_grad_batches") == 2
    phases = {name for s in record.steps for name in s.phase_ns}
    assert {"data_wait", "h2d", "forward", "backward", "optimizer", "evaluation"} <= phases
    hooks = _hooks(record)
    assert hooks["Classifier.on_train_batch_end"] == 120  # a call per batch
    assert not any("StepdoctorCallback" in name for name in hooks)  # not our own


def test_a_slow_lightning_callback_is_named_with_its_hook(tmp_path: Path) -> None:
    report, record, out = _judged(
        "lightning_job.py",
        tmp_path,
        _on_top("slow-callbacks"),
        LIGHTNING_FAULT="callback",
        LIGHTNING_STEPS="60",
    )
    top = _top(report, out)
    assert top["rule"] == "slow-callbacks", top
    fix = top["fix"]
    assert isinstance(fix, dict) and "WeightStats.on_train_batch_end" in fix["summary"]
    assert "batch_idx % 50 == 0" in fix["summary"]
    evidence = {e["metric"]: e["value"] for e in top["evidence"]}  # type: ignore[union-attr]
    assert str(evidence["Lightning's hooks, slowest first"]).startswith(
        "WeightStats.on_train_batch_end"
    )
    assert _hooks(record)["WeightStats.on_train_batch_end"] == 60


def test_lightnings_callback_watches_a_fit_without_stepdoctor_run(tmp_path: Path) -> None:
    """...beside the Trainer's own profiler, which still gets every action and reports."""
    watched = tmp_path / "watched"
    proc = subprocess.run(
        [sys.executable, str(HERE / "lightning_job.py")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "PYTHONWARNINGS": "ignore", "LIGHTNING_WATCH": str(watched),
             "LIGHTNING_PROFILER": "simple", "LIGHTNING_STEPS": "60"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    simple = proc.stdout + proc.stderr
    assert "FIT Profiler Report" in simple and "run_training_batch" in simple
    record = load_run(watched)
    assert len(record.steps) == 60 and record.end is not None and record.end.status == "ok"
    assert record.env_value("framework") == "lightning"
    report = json.loads((watched / "report.json").read_text())
    assert report["summary"]["steps"] == 60


def test_ranks_lightning_starts_itself_are_watched_too(tmp_path: Path) -> None:
    _, record, out = _run("lightning_job.py", tmp_path, LIGHTNING_DEVICES="2", LIGHTNING_STEPS="20")
    assert len(record.steps) == 20  # rank 0: the process stepdoctor run started
    child = load_run(out / "rank-1")  # started by Lightning's launcher, under stepdoctor run
    assert (child.meta.rank, child.meta.world_size) == (1, 2)
    assert len(child.steps) == 20 and child.env_value("framework") == "lightning"


# -- Hugging Face Trainer ---------------------------------------------------------------------


def test_hf_trainer_steps_are_optimizer_updates_and_a_healthy_job_stays_clean(
    tmp_path: Path,
) -> None:
    report, record, _ = _judged("hf_job.py", tmp_path, _clean, HF_ACCUMULATION="2", HF_STEPS="20")
    assert len(record.steps) == 20
    summary = report["summary"]
    assert isinstance(summary, dict) and summary["micro_batches_per_step"] == 2
    _phases_add_up(record)
    assert record.env_value("transformers.gradient_accumulation_steps") == 2
    hooks = _hooks(record)
    assert hooks["Trainer.log (logging_steps)"] == 3  # logging_steps=10 of 20 steps, + the end


def test_a_slow_data_collator_is_the_trainers_data_wait(tmp_path: Path) -> None:
    report, _, out = _judged(
        "hf_job.py", tmp_path, _on_top("input-bound"), HF_FAULT="collator", HF_STEPS="20"
    )
    top = _top(report, out)
    assert top["rule"] == "input-bound", top
    where = top["where"]
    assert isinstance(where, list) and where and "slow_pad" in where[0]["function"]


def test_evaluation_every_few_steps_is_named_with_the_trainers_argument(tmp_path: Path) -> None:
    """...and the Trainer's saving is its checkpoint phase."""
    report, record, out = _judged(
        "hf_job.py",
        tmp_path,
        _on_top("frequent-evaluation"),
        HF_EVAL_STEPS="2",
        HF_STEPS="10",
        HF_SAVE_STEPS="5",
    )
    top = _top(report, out)
    assert top["rule"] == "frequent-evaluation", top
    fix = top["fix"]
    assert isinstance(fix, dict) and "eval_steps=2" in fix["summary"]
    assert "eval_steps=1000" in fix["snippet"]
    hooks = _hooks(record)
    assert hooks["Trainer.evaluate (eval_steps)"] == 5
    assert hooks["Trainer._save_checkpoint (save_steps)"] == 2
    # the save after step 5 falls in the next step; the one after the last step in none
    assert sum(s.phase("checkpoint") > 0 for s in record.steps) == 1


# -- Keras 3 ----------------------------------------------------------------------------------


def test_keras_fit_is_one_step_per_batch_and_a_healthy_job_stays_clean(tmp_path: Path) -> None:
    report, record, _ = _judged("keras_job.py", tmp_path, _clean)
    assert len(record.steps) == 2 * 58  # 2 epochs of 14,746 samples in batches of 256
    _phases_add_up(record)
    assert record.env_value("keras.batch_size") == 256
    # fit() was given arrays: any word on its input is about them, not a DataLoader
    assert record.env_value("keras.data") == "arrays"
    findings = report["findings"]
    assert isinstance(findings, list)
    for finding in (f for f in findings if f["rule"] == "input-bound"):
        fix = finding["fix"]
        assert "DataLoader(" not in fix["summary"] + (fix["snippet"] or ""), fix
        assert fix["summary"].startswith("fit() was given arrays"), fix
    phases = {name for s in record.steps for name in s.phase_ns}
    assert {"data_wait", "forward", "backward", "optimizer", "evaluation"} <= phases


@needs_module("tensorflow", "Keras on its TensorFlow backend")
def test_keras_on_tensorflow_is_one_step_per_batch_and_a_healthy_job_stays_clean(
    tmp_path: Path,
) -> None:
    """On TensorFlow a step is one call of Keras's compiled train function (the batch's
    fetch from its tf.data pipeline, forward, backward and update in the graph): timed as
    ``train_step``, with fit's batch_size as its samples."""
    report, record, _ = _judged(
        "keras_job.py", tmp_path, _clean, KERAS_BACKEND="tensorflow", KERAS_EPOCHS="1"
    )
    assert record.env_value("keras.backend") == "tensorflow"
    assert isinstance(record.env_value("keras.tensorflow_gpus"), int)
    assert len(record.steps) == 58  # 14,746 samples in batches of 256
    _phases_add_up(record)
    assert all(s.phase_ns.get("train_step", 0) > 0 for s in record.steps)
    assert {s.batch_size for s in record.steps} == {256}
    summary = report["summary"]
    assert isinstance(summary, dict) and summary["samples_per_sec"] > 0


@needs_module("tensorflow", "Keras on its TensorFlow backend")
def test_a_slow_keras_callback_on_tensorflow_is_named_with_its_hook(tmp_path: Path) -> None:
    report, record, out = _judged(
        "keras_job.py", tmp_path, _on_top("slow-callbacks"),
        KERAS_BACKEND="tensorflow", KERAS_FAULT="callback", KERAS_EPOCHS="1",
    )  # fmt: skip
    assert {h.name for h in record.hooks} == {"WeightNorms.on_train_batch_end"}
    top = _top(report, out)
    fix = top["fix"]
    assert isinstance(fix, dict)
    assert "Most of it is WeightNorms.on_train_batch_end" in fix["summary"], fix
    assert "if batch % 50 == 0:" in fix["snippet"]


@needs_module("tensorflow", "Keras on its TensorFlow backend")
@pytest.mark.parametrize("read_ms", ["40", "1"], ids=["planted", "fixed"])
def test_a_slow_generator_on_tensorflow_is_the_steps_wait_for_data(
    tmp_path: Path, read_ms: str
) -> None:
    """A generator given to fit on TensorFlow: tf.data makes its batches on a thread of its
    own and prefetches them, and the compiled step fetches each inside its call. A batch read
    in 40 ms, slower than a step computes, is waited for (input-bound on top, in the
    generator's terms); one read in 1 ms is ready before each call (clean)."""
    judge = _on_top("input-bound") if read_ms == "40" else _clean
    report, record, out = _judged(
        "keras_job.py", tmp_path, judge, KERAS_BACKEND="tensorflow", KERAS_FAULT="generator",
        KERAS_EPOCHS="1", KERAS_READ_MS=read_ms,
    )  # fmt: skip
    assert len(record.steps) == 64 and record.env_value("keras.data") == "generator"
    assert {h.name: h.calls for h in record.hooks}[GENERATOR_WAIT] == 63  # not the first
    assert {s.batch_size for s in record.steps} == {256}
    if read_ms == "40":
        fix = _top(report, out)["fix"]
        assert isinstance(fix, dict) and fix["summary"].startswith("fit() was given a Python")


@needs_module("tensorflow", "Keras on its TensorFlow backend")
@pytest.mark.parametrize("read_ms", ["60", "1"], ids=["planted", "fixed"])
def test_a_slow_py_dataset_on_tensorflow_is_the_steps_wait_for_data(
    tmp_path: Path, read_ms: str
) -> None:
    """A PyDataset given to fit on TensorFlow, with Keras's one worker: tf.data's thread calls
    its __getitem__ batch by batch, timed there; the two batches Keras reads first for their
    shapes are no step's. Read in 60 ms, each batch is waited for (input-bound on top, told in
    PyDataset's terms); in 1 ms, prefetching hides it (clean)."""
    judge = _on_top("input-bound") if read_ms == "60" else _clean
    report, record, out = _judged(
        "keras_job.py", tmp_path, judge, KERAS_BACKEND="tensorflow", KERAS_FAULT="pydataset",
        KERAS_EPOCHS="1", KERAS_READ_MS=read_ms,
    )  # fmt: skip
    assert len(record.steps) == 64 and record.env_value("keras.data") == "PyDataset"
    calls = {h.name: h.calls for h in record.hooks}
    assert calls[PYDATASET_MADE] == 64 and calls[GENERATOR_WAIT] == 63  # not the first call
    assert {s.batch_size for s in record.steps} == {256}
    if read_ms == "60":
        fix = _top(report, out)["fix"]
        assert isinstance(fix, dict) and "keras.utils.PyDataset" in fix["summary"], fix
        assert "workers" in fix["summary"]


@needs_module("tensorflow", "Keras on its TensorFlow backend")
@pytest.mark.parametrize("fault", ["tfdata", ""], ids=["planted", "fixed"])
def test_a_slow_tf_data_map_is_the_steps_wait_for_data_in_tf_datas_terms(
    tmp_path: Path, fault: str
) -> None:
    """A tf.data pipeline given to fit, fetched inside the compiled step: each batch stamped
    in the graph as it is made. A map that scales each sample in Python (py_function, one at
    a time, no prefetch) keeps the step waiting (input-bound on top, its fix naming the
    pipeline's Python map and the missing prefetch); the same scaling in TensorFlow ops over
    whole batches, in parallel and prefetched, is clean."""
    judge = _on_top("input-bound") if fault else _clean
    report, record, out = _judged(
        "keras_job.py", tmp_path, judge, KERAS_BACKEND="tensorflow", KERAS_DATA="tfdata",
        KERAS_FAULT=fault, KERAS_EPOCHS="1",
    )  # fmt: skip
    assert len(record.steps) == 64 and record.env_value("keras.data") == "tf.data"
    assert {s.batch_size for s in record.steps} == {256}  # the pipeline's batch stage
    waits = {h.name: h.calls for h in record.hooks}
    assert waits[PIPELINE_WAIT] == 63  # every call but the first (it traces the graph)
    if fault:
        assert record.env_value("keras.pipeline") == (
            "from_tensor_slices > map (Python) > batch(256)"
        )
        top = _top(report, out)
        assert top["severity"] == "critical", top
        fix = top["fix"]
        assert isinstance(fix, dict)
        assert "Its map runs Python for each element" in fix["summary"], fix
        assert ".prefetch(tf.data.AUTOTUNE)" in fix["summary"]
        assert "DataLoader" not in fix["summary"] + (fix["snippet"] or "")
    else:
        assert record.env_value("keras.pipeline") == (
            "from_tensor_slices > batch(256) > map (parallel) > prefetch"
        )


@needs_module("tensorflow", "a TensorFlow loop")
@pytest.mark.parametrize("read_ms", ["40", "1"], ids=["planted", "fixed"])
def test_a_hand_written_tf_loop_is_a_step_per_compiled_call_and_its_slow_reader_is_named(
    tmp_path: Path, read_ms: str
) -> None:
    """A GradientTape loop whose step is a tf.function: one step per call of it (its graph
    applies the gradients), its batch's wait the tf.data iterator's next. A reader slower
    than the step (40 ms a batch, one at a time) is input-bound on top, in tf.data's terms;
    one of 1 ms is hidden by tf.data's prefetch (clean)."""
    judge = _on_top("input-bound") if read_ms == "40" else _clean
    report, record, out = _judged("tf_loop.py", tmp_path, judge, TF_READ_MS=read_ms)
    assert record.env_value("framework") == "tensorflow"
    assert record.env_value("tensorflow.step_function") == "train_step"
    # TensorFlow's setup as the job ran it
    assert isinstance(record.env_value("tensorflow.cuda_build"), bool)
    assert isinstance(record.env_value("tensorflow.gpus"), int)
    assert record.env_value("tensorflow.intra_op_threads") == 0  # one per core: the default
    assert len(record.steps) == 64  # 2 epochs of 32 batches
    assert {s.batch_size for s in record.steps} == {256}
    _phases_add_up(record)
    assert all(s.phase_ns.get("train_step", 0) > 0 for s in record.steps[1:])
    assert all(s.phase_ns.get("data_wait", 0) > 0 for s in record.steps)
    assert {h.name: h.calls for h in record.hooks}[NEW_ITERATOR] == 2  # one an epoch
    summary = report["summary"]
    assert isinstance(summary, dict)
    assert "tf.function train_step()" in summary["step_basis"]
    if read_ms == "40":
        top = _top(report, out)
        assert top["severity"] == "critical", top
        fix = top["fix"]
        assert isinstance(fix, dict)
        assert fix["summary"].startswith("The loop's batches come from the tf.data pipeline")
        assert "DataLoader" not in fix["summary"] + (fix["snippet"] or "")


@needs_module("tensorflow", "a TensorFlow loop")
def test_an_eager_tf_loop_is_a_step_per_apply_gradients_split_into_its_phases(
    tmp_path: Path,
) -> None:
    """Run eagerly, the same loop is a step per apply_gradients: the model's call forward,
    the tape's gradient backward, the update optimizer."""
    report, record, _ = _judged("tf_loop.py", tmp_path, _clean, TF_READ_MS="1", TF_EAGER="1")
    assert len(record.steps) == 64
    assert record.env_value("tensorflow.eager") is True
    _phases_add_up(record)
    for phase in ("data_wait", "forward", "backward", "optimizer"):
        assert all(s.phase_ns.get(phase, 0) > 0 for s in record.steps), phase
    summary = report["summary"]
    assert isinstance(summary, dict) and "apply_gradients" in summary["step_basis"]
    assert any(m.param_count for m in record.models)  # described from Keras's layers
    findings = report["findings"]
    assert isinstance(findings, list)
    assert any(f["rule"] == "eager-step" for f in findings)  # told to compile it (info)


@pytest.mark.parametrize(
    "backend",
    ["torch", pytest.param("tensorflow", marks=needs_module("tensorflow", "its backend"))],
)
def test_keras_in_float64_is_told_with_its_floatx(tmp_path: Path, backend: str) -> None:
    """On torch, torch's hooks see the model's float64 parameters; on TensorFlow the Keras
    integration describes the model from its own layers."""
    report, record, out = _judged(
        "keras_job.py", tmp_path, _on_top("float64"), KERAS_FAULT="float64", KERAS_EPOCHS="1",
        KERAS_BACKEND=backend,
    )  # fmt: skip
    assert record.env_value("keras.floatx") == "float64"
    assert any("float64" in " ".join(m.param_dtypes) for m in record.models)
    fix = _top(report, out)["fix"]
    assert isinstance(fix, dict) and "its floatx is 'float64'" in fix["summary"]
    assert fix["snippet"].startswith('keras.config.set_floatx("float32")')
    assert "model.float()" not in fix["summary"]  # no torch call on a model Keras built


def test_a_tiny_keras_batch_is_named_with_fits_batch_size(tmp_path: Path) -> None:
    report, _, out = _judged(
        "keras_job.py", tmp_path, _on_top("small-batch"), KERAS_FAULT="batch", KERAS_EPOCHS="1"
    )
    top = _top(report, out)
    assert top["rule"] == "small-batch", top
    fix = top["fix"]
    assert isinstance(fix, dict) and "fit()'s batch_size (now 4)" in fix["summary"]
    assert "model.fit(x, y, batch_size=" in fix["snippet"]
