"""PsutilReader on this machine: the job's process tree, found at most once per interval."""

from __future__ import annotations

import subprocess
import sys

from traindoctor.collect.readers import PsutilReader
from traindoctor.model import SystemSample

SECOND = 1_000_000_000


def _tree_size(reader: PsutilReader, t_ns: int) -> int:
    (sample,) = reader.read(t_ns)
    assert isinstance(sample, SystemSample)
    assert sample.job_processes is not None
    return sample.job_processes


def test_children_are_found_at_the_next_scan_and_dropped_when_they_end() -> None:
    reader = PsutilReader(children_every_ns=SECOND)
    assert _tree_size(reader, 0) == 1
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        # Between scans the child is not looked for (a /proc walk is costly)...
        assert _tree_size(reader, SECOND // 10) == 1
        # ...and at the next scan it is part of the job's tree.
        assert _tree_size(reader, SECOND + 1) == 2
    finally:
        child.kill()
        child.wait()
    # A child that ended is dropped at once, without waiting for the next scan.
    assert _tree_size(reader, SECOND + 2) == 1
