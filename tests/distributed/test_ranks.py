"""Which rank a process is, and the folder its record goes to."""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from stepdoctor.probes.ranks import (
    RankInfo,
    job_dir,
    rank_dir,
    rank_dirs,
    rank_from_env,
    rank_of_dir,
)


def test_ranks_come_from_torchruns_variables() -> None:
    env = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "TORCHELASTIC_RUN_ID": "abc"}
    assert rank_from_env(env) == RankInfo(3, 1, 4, "abc")
    assert rank_from_env({"RANK": "0", "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "none"}) == (
        RankInfo(0, 0, 2, "")
    )
    assert rank_from_env({}) is None  # not distributed
    assert rank_from_env({"RANK": "0", "WORLD_SIZE": "1"}) is None  # a world of one
    assert rank_from_env({"RANK": "x", "WORLD_SIZE": "2"}) is None  # not numbers
    assert rank_from_env({"RANK": "5", "WORLD_SIZE": "2"}) is None  # outside the world


def test_every_local_rank_names_the_same_job_folder(tmp_path: Path) -> None:
    named = RankInfo(1, 1, 2, "my/run id")
    assert job_dir(named, tmp_path) == tmp_path / "my_run_id"
    unnamed = RankInfo(0, 0, 2, "")
    parent = psutil.Process(os.getppid())
    expected = tmp_path / f"job-{parent.pid}-{int(parent.create_time())}"
    assert job_dir(unnamed, tmp_path) == expected  # the launcher: every rank's parent
    assert rank_dir(expected, unnamed) == expected / "rank-0"


def test_ranks_folders_are_found_in_rank_order(tmp_path: Path) -> None:
    for name in ("rank-10", "rank-2", "rank-x", "other"):
        (tmp_path / name).mkdir()
    (tmp_path / "rank-3").write_text("a file, not a folder")
    assert [p.name for p in rank_dirs(tmp_path)] == ["rank-2", "rank-10"]
    assert rank_of_dir(tmp_path / "rank-7") == 7 and rank_of_dir(tmp_path / "rank-x") is None
    assert rank_of_dir(tmp_path / "other") is None
