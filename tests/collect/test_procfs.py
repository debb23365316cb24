"""procfs: /proc read directly gives what psutil gives, on this machine and on odd files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from stepdoctor.collect.sampling.procfs import (
    CLK_TCK,
    PAGE_SIZE,
    ProcFs,
    ProcStat,
    PsutilCounters,
    children_proc,
    default_children,
    walk_proc,
    walk_psutil,
)


def _stat_line(pid: int, comm: str, ppid: int, utime: int, stime: int) -> bytes:
    """A ``/proc/<pid>/stat`` line: 3 threads, started at tick 4242, 25 pages resident."""
    rest = ["S", str(ppid), *["0"] * 9, str(utime), str(stime), *["0"] * 4, "3", "0"]
    rest += ["4242", "0", "25", *["0"] * 30]
    return f"{pid} ({comm}) {' '.join(rest)}\n".encode()


def test_procfs_reads_what_psutil_reads_on_this_machine() -> None:
    fs, ps = ProcFs(), PsutilCounters()
    raw_cores, through_psutil = fs.cores(), ps.cores()
    assert len(raw_cores) == len(through_psutil) == psutil.cpu_count()
    for (busy, total), (ps_busy, ps_total) in zip(raw_cores, through_psutil, strict=True):
        assert 0 <= busy <= total
        assert abs(total / CLK_TCK - ps_total) < 1.0  # time passes between the reads
        assert abs(busy / CLK_TCK - ps_busy) < 1.0
    raw, other = fs.process(os.getpid()), ps.process(os.getpid())
    assert raw is not None and other is not None
    assert (raw.ppid, raw.threads) == (other.ppid, other.threads)
    assert other.name.startswith(raw.name)
    assert abs(raw.cpu_s - other.cpu_s) < 0.5
    assert abs(raw.rss_bytes - other.rss_bytes) < 0.1 * other.rss_bytes
    assert fs.process(os.getpid()) is not None and fs.process(os.getpid()).start == raw.start


def test_procfs_on_made_up_files(tmp_path: Path) -> None:
    (tmp_path / "stat").write_bytes(
        b"cpu  30 0 10 100 5 0 0 0 0 0\n"
        b"cpu0 10 2 5 50 3 1 1 0 4 0\n"  # guest (4) already counted in user: not added
        b"cpu1 20 0 5 50 2 0 0 1 0 0\n"
        b"intr 12345 1 2 3\n"
    )
    for pid, data in {
        "12": _stat_line(12, "a) (b c", 1, 100, 50),  # a name with parens and spaces
        "14": b"14 (cut",
        "15": b"",
        "17": _stat_line(17, "odd", 1, 0, 0).replace(b" 1 ", b" x ", 1),
    }.items():
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "stat").write_bytes(data)
    fs = ProcFs(str(tmp_path))
    assert fs.cores() == [(2 + 5 + 1 + 1 + 10 + 0.0, 72.0), (20 + 5 + 1 + 0.0, 78.0)]
    assert fs.process(12) == ProcStat(
        ppid=1, name="a) (b c", cpu_s=150 / CLK_TCK, threads=3, rss_bytes=25 * PAGE_SIZE,
        start=4242,
    )  # fmt: skip
    assert fs.process(14) is None and fs.process(15) is None and fs.process(17) is None
    assert fs.process(16) is None  # ended: no folder
    assert not ProcFs.available(str(tmp_path))  # no self/ here
    with pytest.raises(FileNotFoundError):
        ProcFs(str(tmp_path / "missing")).cores()


def test_psutil_counters_drop_a_process_that_ended() -> None:
    counters = PsutilCounters()
    assert counters.process(2**22 + 12345) is None  # beyond pid_max: never a process
    assert counters.process(os.getpid()) is not None


def test_walk_proc_reads_what_psutil_reads_on_this_machine() -> None:
    # Processes come, go, exec (a new name) and are re-parented between the walks: compared
    # are those psutil read the same before and after the raw walk, whose CPU time the two
    # psutil walks bracket.
    before = walk_psutil()
    raw = walk_proc()
    after = walk_psutil()
    stable = {
        pid for pid in set(before) & set(after) & set(raw) if before[pid][:2] == after[pid][:2]
    }
    assert os.getpid() in stable and len(stable) >= 0.9 * len(before)
    tick = 1.0 / os.sysconf("SC_CLK_TCK")  # both round to the kernel's ticks
    for pid in stable:
        ppid, name, cpu = raw[pid]
        assert ppid == before[pid][0]
        assert before[pid][1].startswith(name)  # psutil may find a longer name
        assert before[pid][2] - tick <= cpu <= after[pid][2] + tick
    assert raw[os.getpid()][2] > 0


def test_walk_proc_takes_odd_names_and_skips_what_is_not_a_process(tmp_path: Path) -> None:
    def stat(pid: int, comm: str, ppid: int, utime: int, stime: int) -> bytes:
        rest = ["S", str(ppid), *["0"] * 9, str(utime), str(stime), *["0"] * 30]
        return f"{pid} ({comm}) {' '.join(rest)}\n".encode()

    for pid, data in {
        "12": stat(12, "a) (b c", 1, 100, 50),  # a name with parens and spaces
        "13": stat(13, "worker", 12, 0, 0),
        "14": b"14 (cut",  # truncated
        "15": b"",
        "17": stat(17, "odd", 1, 0, 0).replace(b" 1 ", b" x ", 1),  # not a number
    }.items():
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "stat").write_bytes(data)
    (tmp_path / "16").mkdir()  # ended: no stat
    (tmp_path / "self").mkdir()
    (tmp_path / "meminfo").write_text("x")
    ticks = os.sysconf("SC_CLK_TCK")
    assert walk_proc(str(tmp_path)) == {
        12: (1, "a) (b c", 150 / ticks),
        13: (12, "worker", 0.0),
    }
    with pytest.raises(FileNotFoundError):
        walk_proc(str(tmp_path / "missing"))


def test_children_proc_finds_a_real_child_under_the_thread_that_forked_it() -> None:
    if default_children() is None:
        pytest.skip("this kernel has no /proc/<pid>/task/<tid>/children (CONFIG_PROC_CHILDREN)")
    me = os.getpid()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in (children_proc(me) or [])
        assert children_proc(child.pid) == []
    finally:
        child.kill()
        child.wait()
    assert child.pid not in (children_proc(me) or [])
    assert children_proc(child.pid) == []  # ended: nothing, not an error


def test_children_proc_on_made_up_files(tmp_path: Path) -> None:
    (tmp_path / "40" / "task" / "40").mkdir(parents=True)
    (tmp_path / "40" / "task" / "41").mkdir(parents=True)
    (tmp_path / "40" / "task" / "40" / "children").write_bytes(b"50 51 ")
    (tmp_path / "40" / "task" / "41" / "children").write_bytes(b"52 ")
    assert sorted(children_proc(40, str(tmp_path)) or []) == [50, 51, 52]
    assert children_proc(99, str(tmp_path)) == []  # no such process
    (tmp_path / "60" / "task" / "60").mkdir(parents=True)  # a thread without the file
    assert children_proc(60, str(tmp_path)) is None  # the kernel cannot list children
