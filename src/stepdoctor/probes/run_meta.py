"""Describe this process for a new record: host, Python, cores, memory, command."""

from __future__ import annotations

import os
import platform
import socket
import sys
import time
import uuid

import psutil

from stepdoctor._version import __version__
from stepdoctor.model import RunMeta
from stepdoctor.probes.ranks import rank_from_env

__all__ = ["new_run_meta"]


def new_run_meta(command: tuple[str, ...], origin: int) -> RunMeta:
    """Describe this process for a new record (a run, the doctor, lint, a trace analysis).

    Args:
        command: the command line (default: ``sys.argv``).
        origin: the clock reading (``perf_counter_ns``) the record's times count from.
    """
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = os.cpu_count() or 1
    rank = rank_from_env()
    return RunMeta(
        run_id=uuid.uuid4().hex[:12],
        started_unix_s=time.time(),
        command=command or tuple(sys.argv),
        cwd=os.getcwd(),
        hostname=socket.gethostname(),
        pid=os.getpid(),
        python_version=platform.python_version(),
        stepdoctor_version=__version__,
        cpu_count=os.cpu_count() or 1,
        affinity_cores=affinity,
        total_memory_bytes=psutil.virtual_memory().total,
        clock_origin_ns=origin,
        rank=None if rank is None else rank.rank,
        local_rank=None if rank is None else rank.local_rank,
        world_size=None if rank is None else rank.world_size,
    )
