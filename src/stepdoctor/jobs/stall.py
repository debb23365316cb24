"""A distributed job whose ranks stopped stepping, told while it waits.

A rank that stops (a deadlock, a rank-only wait, a collective the others never join) leaves
the other ranks waiting in their collectives until the process group's timeout: 30 minutes
by default, with nothing said meanwhile. The launcher (``stepdoctor run --nproc-per-node``)
reads the steps its ranks' records gain (each rank's monitor flushes every second; only the
bytes appended since the last look are read), and when no rank has completed a step for
``--stall-after`` seconds it reads the records as they are and says which rank the others
wait for, its last phase and where in its code it is (``stall_findings``), once per stall;
``render.job.render_stall`` says it.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path

from stepdoctor.jobs.hangs import hang_findings
from stepdoctor.jobs.rows import summarise_job
from stepdoctor.model import Finding, RankRow
from stepdoctor.probes.flight import STALL_AFTER_S
from stepdoctor.probes.ranks import rank_dirs, rank_of_dir

__all__ = ["STALL_AFTER_S", "StallWatch", "stall_findings"]

#: Bytes of a record line read to tell a steps line (``{"type":"steps",...``) from others.
_HEAD = 32


class StallWatch:
    """Counts the steps in a job folder's rank records as they grow; ``poll`` says once
    when none grew for ``after_s`` seconds after every rank of the ``world`` made a step
    (start-up, however long, is no stall).

    Args:
        job: the job's folder (``OUT``: ``rank-N`` folders appear as the ranks start).
        world: ranks expected.
        after_s: seconds without a step on any rank.
        clock: seconds, monotonic.
    """

    def __init__(
        self,
        job: Path,
        world: int,
        after_s: float = STALL_AFTER_S,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._job = job
        self._world = world
        self._after_s = after_s
        self._clock = clock
        # a record there already (an earlier run into the same folder) is not this run's
        self._offsets: dict[int, int] = {}
        for folder in rank_dirs(job):
            rank = rank_of_dir(folder)
            if rank is not None:
                with contextlib.suppress(OSError):
                    self._offsets[rank] = (folder / "run.jsonl").stat().st_size
        self._partial: dict[int, bytes] = {}
        self.steps: dict[int, int] = {}
        """Steps in each rank's record so far."""
        self._changed = clock()
        self._told = False

    def poll(self) -> bool:
        """Read what the records gained; return True once per stall, when it is due."""
        grew = False
        for folder in rank_dirs(self._job):
            rank = rank_of_dir(folder)
            if rank is not None:
                grew |= self._read(rank, folder / "run.jsonl")
        now = self._clock()
        if grew or len(self.steps) < self._world or not all(self.steps.values()):
            self._changed = now
            self._told = False
            return False
        if self._told or now - self._changed < self._after_s:
            return False
        self._told = True
        return True

    @property
    def idle_s(self) -> float:
        """Seconds since a rank last gained a step (or a rank's record appeared)."""
        return self._clock() - self._changed

    def _read(self, rank: int, path: Path) -> bool:
        """Count the steps in the lines appended to ``path``; whether there were any."""
        try:
            with path.open("rb") as f:
                f.seek(self._offsets.get(rank, 0))
                data = f.read()
        except OSError:  # not written yet, or gone: nothing gained
            return False
        if rank not in self.steps:
            self.steps[rank] = 0
        self._offsets[rank] = self._offsets.get(rank, 0) + len(data)
        lines = (self._partial.pop(rank, b"") + data).split(b"\n")
        self._partial[rank] = lines.pop()  # the last one, not ended yet
        gained = 0
        for line in lines:
            if b'"type":"steps"' not in line[:_HEAD]:
                continue
            try:
                rows = json.loads(line).get("rows", [])
            except ValueError:  # a torn line: the reader says so at the end
                continue
            gained += len(rows) if isinstance(rows, list) else 0
        self.steps[rank] += gained
        return gained > 0


def stall_findings(job: Path) -> tuple[list[RankRow], list[Finding]]:
    """The ranks of a job that waits, read from their records as they are (serially: the
    launcher's own process), and what they say of the stall: the rank the others wait for,
    where one stands out (``hang_findings``)."""
    rows, _, _ = summarise_job(job, executor="serial")
    return rows, hang_findings(rows, ended=False)
