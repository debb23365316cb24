"""Which rank of a distributed job this process is, and where its record goes.

torchrun (``torch.distributed.run``) starts one process per rank with ``RANK``,
``LOCAL_RANK`` and ``WORLD_SIZE`` in its environment, and ``TORCHELASTIC_RUN_ID`` (the
rendezvous id; ``none`` unless one was given or ``--standalone`` made one). Every rank of a
job run as ``torchrun ... -m stepdoctor run train.py`` is watched by its own session: each
writes its record to a folder of its own, ``<job folder>/rank-<RANK>``, so that no two
processes ever append to one file. The job folder is ``--out`` where given, else one folder
under ``./stepdoctor-runs/`` that every local rank names alike (the run id, or the elastic
agent, the parent of every rank on the host, by its pid and start time).

A framework that starts its other ranks itself (Lightning's script launcher runs the script
again with ``LOCAL_RANK``, ``NODE_RANK`` and ``WORLD_SIZE`` but no ``RANK``) has them started
under ``stepdoctor run`` by its integration, which sets ``LAUNCHED_JOB_VARIABLE`` (the run
folder of the process that launched them, rank 0) and ``LAUNCHED_LOCAL_WORLD_VARIABLE`` (the
processes per node): rank ``NODE_RANK * that + LOCAL_RANK`` records in ``rank-<rank>`` there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

__all__ = [
    "LAUNCHED_JOB_VARIABLE",
    "LAUNCHED_LOCAL_WORLD_VARIABLE",
    "RANK_DIR_PREFIX",
    "RankInfo",
    "job_dir",
    "rank_dir",
    "rank_dirs",
    "rank_from_env",
    "rank_of_dir",
]

RANK_DIR_PREFIX = "rank-"
LAUNCHED_JOB_VARIABLE = "STEPDOCTOR_JOB_DIR"
LAUNCHED_LOCAL_WORLD_VARIABLE = "STEPDOCTOR_LOCAL_WORLD_SIZE"


@dataclass(frozen=True, slots=True)
class RankInfo:
    """A process's place in a distributed job."""

    rank: int
    local_rank: int
    world_size: int
    run_id: str
    """The rendezvous id (``TORCHELASTIC_RUN_ID``), or ``""``."""
    job_folder: str = ""
    """The job's folder as the launching process gave it (``LAUNCHED_JOB_VARIABLE``), or
    ``""``."""


def rank_from_env(environ: Mapping[str, str] = os.environ) -> RankInfo | None:
    """The rank torchrun (or a launcher setting the same variables) gave this process; None
    outside a distributed job of two ranks or more, or when the variables are not numbers."""
    try:
        world = int(environ.get("WORLD_SIZE", "1"))
        if "RANK" not in environ and LAUNCHED_LOCAL_WORLD_VARIABLE in environ:
            local = int(environ["LOCAL_RANK"])
            per_node = int(environ[LAUNCHED_LOCAL_WORLD_VARIABLE])
            rank = int(environ.get("NODE_RANK", "0")) * per_node + local
        else:
            rank = int(environ["RANK"])
            local = int(environ.get("LOCAL_RANK", str(rank)))
    except (KeyError, ValueError):
        return None
    if world < 2 or not 0 <= rank < world:
        return None
    run_id = environ.get("TORCHELASTIC_RUN_ID", "")
    return RankInfo(
        rank,
        local,
        world,
        "" if run_id == "none" else run_id,
        environ.get(LAUNCHED_JOB_VARIABLE, ""),
    )


def job_dir(info: RankInfo, base: Path | None = None) -> Path:
    """The folder every rank of the job on this host writes under, when no ``--out`` was
    given: the launching process's run folder (``LAUNCHED_JOB_VARIABLE``), else
    ``./stepdoctor-runs/<run id>``, or ``.../job-<agent pid>-<its start time>``."""
    if info.job_folder:
        return Path(info.job_folder)
    if info.run_id:
        name = info.run_id
    else:
        parent = os.getppid()
        try:
            started = int(psutil.Process(parent).create_time())
        except psutil.Error:
            started = 0
        name = f"job-{parent}-{started}"
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return (base or Path.cwd() / "stepdoctor-runs") / safe


def rank_dir(job: Path, info: RankInfo) -> Path:
    """The folder of this rank's record in the job's folder."""
    return job / f"{RANK_DIR_PREFIX}{info.rank}"


def rank_of_dir(folder: Path) -> int | None:
    """The rank a ``rank-N`` folder is named for (None: not such a folder)."""
    if not folder.name.startswith(RANK_DIR_PREFIX):
        return None
    try:
        return int(folder.name[len(RANK_DIR_PREFIX) :])
    except ValueError:
        return None


def rank_dirs(job: Path) -> list[Path]:
    """The ranks' folders of a job's folder, in rank order."""
    found = [(rank_of_dir(p), p) for p in job.glob(f"{RANK_DIR_PREFIX}*") if p.is_dir()]
    return [p for rank, p in sorted((r, p) for r, p in found if r is not None)]
