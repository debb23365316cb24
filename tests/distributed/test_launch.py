"""Distributed runs on the CPU (gloo): ranks launched by ``stepdoctor run --nproc-per-node``
and by torchrun, each with a record of its own; module-style jobs (``-m``)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from stepdoctor.jobs.stragglers import WAIT_SHARE
from stepdoctor.record import load_run
from stepdoctor.render.job import JOB_HEADING, RANKS_HEADING
from tests._machine import busy_cores
from tests._zygote import stepdoctor_run

HERE = Path(__file__).parent
SCHEMA = HERE.parents[1] / "docs" / "job-report.schema.json"
#: Cores other processes may keep busy for the planted CPU hog to be the only competitor.
QUIET_CORES = 0.3
pytestmark = pytest.mark.scenario


def _stepdoctor(
    *args: str, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stepdoctor", *args],
        capture_output=True, text=True, timeout=300, cwd=cwd,
        env={**os.environ, "PYTHONWARNINGS": "ignore", **env},
    )  # fmt: skip


@pytest.mark.serial  # "no straggler" holds where no other test's processes slow one rank
def test_nproc_per_node_runs_each_rank_watched_and_reports_the_job(tmp_path: Path) -> None:
    """A healthy job (convolutions: the all-reduce 3-5% of a step): each rank recorded, the
    job's table, no straggler and no communication cost worth a warning."""
    out = tmp_path / "job"
    proc = _stepdoctor("run", "--nproc-per-node", "2", "--out", str(out), "--json",
                       str(tmp_path / "report.json"), str(HERE / "ddp_job.py"),
                       DDP_STEPS="14", DDP_MODEL="conv", DDP_BATCH="512")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank in (0, 1):
        record = load_run(out / f"rank-{rank}")
        assert (record.meta.rank, record.meta.world_size) == (rank, 2)
        assert len(record.steps) == 14 and record.end is not None
        # the other rank's CPU is the job's, not a competing process's
        assert any(s.ranks_cpu_pct for s in record.system)
    # the job first: its ranks' table, its verdict, then the ranks' own findings
    assert proc.stderr.index("Ranks\nrank  steps") < proc.stderr.index(JOB_HEADING)
    job = proc.stderr.split(JOB_HEADING, 1)[1].split(RANKS_HEADING, 1)[0]
    # healthy ranks wait alike: no straggler (on a busy machine, one that other processes
    # slowed is said as info)
    assert "[WARNING]" not in job and "[CRITICAL]" not in job, job
    data = json.loads((tmp_path / "report.json").read_text())  # the job's, not rank 0's
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    assert data["job"]["world_size"] == 2 and data["job"]["straggler"] is None
    assert [r["meta"]["rank"] for r in data["ranks"]] == [0, 1]
    for rank in (0, 1):  # DDP's own timings kept, of every iteration (by default: 1 in 100)
        (ddp,) = load_run(out / f"rank-{rank}").ddp
        assert ddp.iterations >= 13 and ddp.backward_comm_ns and ddp.backend == "gloo"


def test_all_reduces_that_take_half_a_step_are_the_jobs_cost(tmp_path: Path) -> None:
    """The MLP at 32 samples a rank: ~1.1 M gradients all-reduced for little computation.
    With DDP's fp16 comm hook registered, the hook is recorded and not offered again."""
    out = tmp_path / "job"
    proc = _stepdoctor("run", "--nproc-per-node", "2", "--width", "1000", "--out", str(out),
                       str(HERE / "ddp_job.py"), DDP_STEPS="60", DDP_HOOK="fp16")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = proc.stderr.split(JOB_HEADING, 1)[1]
    assert "Gradient all-reduces take" in job and "(comm-bound)" in job, job
    assert "comm hook fp16_compress_hook" in job and "backend gloo" in job
    assert "a larger batch" in job and "register_comm_hook" not in job
    (ddp,) = load_run(out / "rank-0").ddp
    assert ddp.comm_hook == "fp16_compress_hook"


@pytest.mark.serial  # its planted hog must be the only load on the machine
def test_a_rank_beside_a_cpu_hog_on_its_core_is_named(tmp_path: Path) -> None:
    """Each rank pinned to a core of its own, two busy shells pinned to rank 1's: rank 1 is
    the one the other waits for, late in its computation, with the shells named."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores")
    # the planted hog must be the only one: with other processes busy on the machine, rank 0's
    # core is as contended as rank 1's (one more busy process made rank 0 the straggler)
    busy = busy_cores()
    if busy > QUIET_CORES:
        pytest.skip(f"the machine is busy ({busy:.1f} cores): the planted hog is not alone")
    core = sorted(os.sched_getaffinity(0))[1]
    busy = ["taskset", "-c", str(core), "sh", "-c", "while :; do :; done"]
    hogs = [subprocess.Popen(busy), subprocess.Popen(busy)]
    try:
        out = tmp_path / "job"
        proc = _stepdoctor("run", "--nproc-per-node", "2", "--width", "1000", "--out", str(out),
                           str(HERE / "ddp_job.py"), DDP_STEPS="60", DDP_MODEL="conv",
                           DDP_BATCH="128", DDP_PIN="1")  # fmt: skip
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = proc.stderr.split(JOB_HEADING, 1)[1]
    if "Rank 1 holds back the other rank:" not in job:
        # other load that began during the run takes rank 0's core too (seen beside a
        # fresh-clone check run at the same time): the planted hog was not alone
        after = busy_cores()
        if after > QUIET_CORES:
            pytest.skip(f"the machine became busy ({after:.1f} cores) during the run")
        # the scheduler may not have let the shells slow rank 1 by a straggler's share (a
        # fresh-clone run: 96.6 against 90.5 ms a step); then naming no one is the verdict
        lost = _waited_for_rank_1(out)
        if lost < WAIT_SHARE:
            assert "holds back" not in job, job
            pytest.skip(f"the hog cost rank 0 only {lost:.0%} of its step in waits")
    assert "Rank 1 holds back the other rank:" in job, job
    assert "computation" in job and "sh (pid " in job, job


def _waited_for_rank_1(out: Path) -> float:
    """The share of rank 0's step it spent waiting for rank 1 beyond rank 1's own waits
    (DDP's all-reduce times: the straggler rule's measure)."""
    records = [load_run(out / f"rank-{rank}") for rank in (0, 1)]
    comm = [r.ddp[0].backward_comm_ns or 0 for r in records]
    steps = [s.duration_ns for s in records[0].steps]
    return (comm[0] - comm[1]) / statistics.median(steps)


def test_torchrun_with_stepdoctor_as_the_module_records_each_rank_and_names_a_slow_one(
    tmp_path: Path,
) -> None:
    """torchrun starts ``stepdoctor run`` on each rank; rank 1 reads its data slowly: each
    rank recorded, one report printed (rank 0's), and the job's folder read afterwards names
    rank 1 as the one the other waits for, because of its data loading."""
    out = tmp_path / "job"
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", "stepdoctor", "run", "--out", str(out), str(HERE / "ddp_job.py")],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "ignore", "DDP_STEPS": "80",
             "DDP_SLOW_RANK": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["rank-0", "rank-1"]
    assert proc.stderr.count("Findings") <= 1  # only rank 0 prints its report
    report = _stepdoctor("report", "--width", "1000", str(out))
    assert report.returncode == 0, report.stderr[-3000:]
    job = report.stdout.split(JOB_HEADING, 1)[1].split(RANKS_HEADING, 1)[0]
    assert "Rank 1 holds back the other rank:" in job, job
    assert "because of its data loading" in job, job
    # the JSON and the page are the job's too: the straggler and its cause first
    written = _stepdoctor("report", "--format", "json", "-o", str(tmp_path / "job.json"), str(out))
    assert written.returncode == 0, written.stderr[-3000:]
    data = json.loads((tmp_path / "job.json").read_text())
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    assert data["job"]["straggler"]["rank"] == 1
    assert data["job"]["straggler"]["cause"] == "data_wait"
    # no rank calls its sibling rank (or the launcher) a competing process
    pids = {load_run(out / f"rank-{rank}").meta.pid for rank in (0, 1)}
    for rank in data["ranks"]:
        for finding in rank["findings"]:
            named = str({e["metric"]: e["value"] for e in finding["evidence"]}
                        .get("top other processes", ""))  # fmt: skip
            assert not any(f"pid {pid}," in named for pid in pids), finding
    page = _stepdoctor("report", "--format", "html", "-o", str(tmp_path / "job.html"), str(out))
    assert page.returncode == 0, page.stderr[-3000:]
    html = (tmp_path / "job.html").read_text()
    assert html.index("Rank 1 holds back the other rank") < html.index("Rank 0 in detail")
    refused = _stepdoctor("report", "--format", "perfetto", str(out))
    assert refused.returncode == 2 and "rank-0" in refused.stderr
    assert "Traceback" not in refused.stderr


@pytest.mark.serial  # eight ranks load every core: beside no other test
def test_eight_ranks_on_one_host_write_eight_whole_records(tmp_path: Path) -> None:
    out = tmp_path / "job"
    proc = _stepdoctor("run", "--nproc-per-node", "8", "--no-report", "--stacks", "off",
                       "--json", str(tmp_path / "job.json"), "--out", str(out),
                       str(HERE / "tiny_job.py"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = {int(p.name.split("-")[1]): load_run(p) for p in out.iterdir()}
    assert sorted(records) == list(range(8))
    for rank, record in records.items():
        assert record.meta.rank == rank and record.meta.world_size == 8
        assert len(record.steps) == 40 and record.end is not None and record.end.status == "ok"
    assert len({r.meta.pid for r in records.values()}) == 8
    # the job's JSON: eight rows and reports; a finding every rank makes is said once
    data = json.loads((tmp_path / "job.json").read_text())
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    assert [row["rank"] for row in data["job"]["ranks_table"]] == list(range(8))
    assert [r["meta"]["rank"] for r in data["ranks"]] == list(range(8))
    made = sum(len(r["findings"]) for r in data["ranks"])
    said = data["job"]["rank_findings"]
    assert sum(len(f["ranks"]) for f in said) == made  # each rank's finding said once
    for f in said:
        assert f["every_rank"] == (f["ranks"] == list(range(8)))


def test_a_module_runs_as_python_m_would(tmp_path: Path) -> None:
    package = tmp_path / "trainer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "fit.py").write_text(
        "import sys\n"
        "import torch\n"
        "model = torch.nn.Linear(4, 1)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for _ in range(int(sys.argv[1])):\n"
        "    opt.zero_grad()\n"
        "    model(torch.randn(8, 4)).sum().backward()\n"
        "    opt.step()\n"
        "print('argv', sys.argv[1:], __name__)\n"
    )
    proc = stepdoctor_run(  # forked from the zygote: the module found from the folder it runs in
        ["run", "--no-report", "--out", str(tmp_path / "run"), "-m", "trainer.fit", "25"],
        env={**os.environ, "PYTHONWARNINGS": "ignore"}, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "argv ['25'] __main__" in proc.stdout
    record = load_run(tmp_path / "run")
    assert len(record.steps) == 25 and record.meta.command[2:] == ("-m", "trainer.fit", "25")
    missing = _stepdoctor("run", "-m", "no_such_module_here", cwd=tmp_path)
    assert missing.returncode != 0 and "no module named 'no_such_module_here'" in missing.stderr
    assert "Traceback" not in missing.stderr


def _parts(text: str, heading: str) -> tuple[str, str]:
    """``text`` before and after ``heading``, which must be there (the live report of a
    hang comes only if the launcher saw the stall before the process group's timeout)."""
    before, found, after = text.partition(heading)
    assert found, f"no {heading!r} in:\n{text[-5000:]}"
    return before, after


def test_a_planted_hang_is_reported_while_it_waits_and_after(tmp_path: Path) -> None:
    """Rank 1 stops after 10 steps; rank 0 waits in its all-reduce until the process group's
    timeout (12 s). 3 s without a step, the launcher says which rank the others wait for and
    where it is; when the timeout ends the job, the job's report says it again."""
    out = tmp_path / "job"
    proc = _stepdoctor("run", "--nproc-per-node", "2", "--width", "1000", "--out", str(out),
                       "--stall-after", "3", str(HERE / "ddp_job.py"), DDP_STEPS="60",
                       DDP_HANG_RANK="1", DDP_HANG_AT="10", DDP_TIMEOUT_S="12")  # fmt: skip
    assert proc.returncode != 0  # the job failed: its exit code is kept
    live, after = _parts(proc.stderr, "The job, all ranks together:")
    assert "no rank has completed a step for" in live, proc.stderr[-5000:]
    assert "(steps so far: rank 0: 10, rank 1: 10); the job is still running" in live
    waiting = _parts(live, "The job, while it waits:")[1]
    assert "Rank 1 stopped stepping; rank(s) 0 wait for it" in waiting, waiting
    assert "wait_for_reply" in waiting and "it is still there" in waiting
    # the flight recorder's view: rank 0 waits in a collective rank 1 never issued
    assert "which rank 1 never issued" in waiting, waiting
    assert "Rank 1 stopped stepping; rank(s) 0 waited for it" in after, after
    assert "wait_for_reply" in after and "ddp_job.py" in after, after
    assert "Traceback" not in after


def test_a_world_of_one_rank_is_one_run(tmp_path: Path) -> None:
    out = tmp_path / "job"
    proc = _stepdoctor("run", "--nproc-per-node", "1", "--stacks", "off", "--out", str(out),
                       str(HERE / "tiny_job.py"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = load_run(out)  # no rank folders: a world of one is not distributed
    assert len(record.steps) == 40 and record.meta.rank is None
    assert "a world of one rank" in proc.stderr and "steps: 40" in proc.stderr


def test_ranks_out_of_step_are_a_desync(tmp_path: Path) -> None:
    """After 10 steps rank 1 broadcasts a tensor where rank 0 all-reduces its gradients: the
    flight recorders of both hold a different collective under one number."""
    out = tmp_path / "job"
    proc = _stepdoctor("run", "--nproc-per-node", "2", "--width", "1000", "--out", str(out),
                       "--stall-after", "3", str(HERE / "ddp_job.py"), DDP_STEPS="60",
                       DDP_DESYNC_RANK="1", DDP_HANG_AT="10", DDP_TIMEOUT_S="10")  # fmt: skip
    assert proc.returncode != 0
    live, after = _parts(proc.stderr, "The job, all ranks together:")
    waiting = _parts(live, "The job, while it waits:")[1]
    assert "(desync)" in waiting and "rank 1: gloo:broadcast of int64[10]" in waiting, waiting
    assert "rank 0: gloo:all_reduce of float32[" in waiting
    assert "(desync)" in after, after
