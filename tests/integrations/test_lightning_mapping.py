"""Lightning's profiled actions as phases and hooks, and its launched ranks' command and
record folder (no Lightning run: the names are Lightning 2.6's own, as its profiler gives
them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepdoctor.integrations.lightning import phase_of, watched_command
from stepdoctor.probes.ranks import (
    LAUNCHED_JOB_VARIABLE,
    LAUNCHED_LOCAL_WORLD_VARIABLE,
    job_dir,
    rank_dir,
    rank_from_env,
)

CHECKPOINT_STATE = (
    "{'monitor': None, 'mode': 'min', 'every_n_train_steps': 0, 'every_n_epochs': 1, "
    "'train_time_interval': None}"
)


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("[_TrainingEpochLoop].train_dataloader_next", ("data_wait", None)),
        ("[Strategy]SingleDeviceStrategy.batch_to_device", ("h2d", None)),
        ("[Strategy]DDPStrategy.training_step", ("forward", None)),
        ("[Strategy]SingleDeviceStrategy.backward", (None, None)),  # torch's own hook times it
        ("[LightningModule]Classifier.optimizer_step", ("optimizer", None)),
        ("[LightningModule]Classifier.optimizer_zero_grad", ("optimizer", None)),
        ("[LightningModule]Classifier.on_train_batch_end",
         ("callbacks", "Classifier.on_train_batch_end")),
        ("[LightningModule]Classifier.transfer_batch_to_device", (None, None)),
        ("[LightningModule]Classifier.on_validation_model_eval", (None, None)),
        (f"[Callback]ModelCheckpoint{CHECKPOINT_STATE}.on_train_batch_end",
         ("callbacks", "ModelCheckpoint.on_train_batch_end")),
        ("[Callback]main.<locals>.WeightStats.on_train_batch_end",
         ("callbacks", "WeightStats.on_train_batch_end")),
        ("[Callback]kit.<locals>.StepdoctorCallback.on_train_batch_end", (None, None)),
        ("save_checkpoint", ("checkpoint", None)),
        ("run_training_batch", (None, None)),
    ],
)  # fmt: skip
def test_lightnings_actions_are_phases_and_named_hooks(
    action: str, expected: tuple[str | None, str | None]
) -> None:
    assert phase_of(action) == expected


def test_a_launched_rank_runs_under_stepdoctor_run() -> None:
    assert watched_command(["/usr/bin/python3", "/job/train.py", "--lr", "0.1"]) == [
        "/usr/bin/python3", "-m", "stepdoctor", "run", "--no-report",
        "/job/train.py", "--lr", "0.1",
    ]  # fmt: skip
    assert watched_command(["/usr/bin/python3", "-m", "pkg.train"])[-3:] == [
        "--no-report", "-m", "pkg.train",
    ]  # fmt: skip


def test_a_launched_rank_records_in_the_launching_runs_folder(tmp_path: Path) -> None:
    env = {
        "LOCAL_RANK": "1",
        "NODE_RANK": "1",
        "WORLD_SIZE": "4",
        LAUNCHED_LOCAL_WORLD_VARIABLE: "2",
        LAUNCHED_JOB_VARIABLE: str(tmp_path),
    }
    info = rank_from_env(env)
    assert info is not None and (info.rank, info.local_rank, info.world_size) == (3, 1, 4)
    assert rank_dir(job_dir(info), info) == tmp_path / "rank-3"
    # torchrun's RANK wins where both are set
    both = rank_from_env({**env, "RANK": "2"})
    assert both is not None and both.rank == 2
    # Lightning's own variables alone (a rank not launched by us): no rank of ours
    assert rank_from_env({"LOCAL_RANK": "1", "WORLD_SIZE": "2"}) is None


def test_the_callback_pickles_and_the_wrapped_profiler_keeps_its_report() -> None:
    import pickle

    pytest.importorskip("lightning")
    from stepdoctor.integrations.lightning import StepdoctorCallback, StepdoctorProfiler

    callback = StepdoctorCallback(report=False)
    again = pickle.loads(pickle.dumps(callback))  # ddp_spawn sends the Trainer to its ranks
    assert type(again) is type(callback)

    class Wrapped:
        torn_down = 0

        def teardown(self, stage: object) -> None:
            self.torn_down += 1

    wrapped = Wrapped()
    profiler = StepdoctorProfiler(None, wrapped=wrapped)
    profiler.__del__()  # ours is dropped before the Trainer asks the wrapped one for its report
    assert wrapped.torn_down == 0
    assert pickle.loads(pickle.dumps(StepdoctorProfiler(None, wrapped=0))) == 0
