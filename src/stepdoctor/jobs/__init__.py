"""One diagnosis for a distributed job from its ranks' records: a row per rank (``rows``,
the map), then the job judged from them (the reduce): the rank the others wait for
(``stragglers``), the communication's cost (``comm``), a hang or a desync (``hangs``), all of
it from the job's folder (``verdict``); a stall told while the job waits (``stall``).
"""

from stepdoctor.jobs.comm import comm_findings
from stepdoctor.jobs.hangs import WAITING_PHASES, hang_findings
from stepdoctor.jobs.rows import (
    HANG_SAMPLES,
    RankRow,
    rank_row,
    rank_rows,
    summarise_job,
    summarise_rank,
)
from stepdoctor.jobs.stall import StallWatch, stall_findings
from stepdoctor.jobs.stragglers import (
    CAUSE_SHARE,
    COMPUTE_PHASES,
    CONTENDED_SHARE,
    CRITICAL_WAIT_SHARE,
    MIN_CRITICAL_STEPS,
    UNEXPLAINED_SHARE,
    WAIT_SHARE,
    job_findings,
)
from stepdoctor.jobs.verdict import (
    is_job_dir,
    job_report,
    rank_findings,
    rank_record,
)

__all__ = [
    "CAUSE_SHARE",
    "COMPUTE_PHASES",
    "CONTENDED_SHARE",
    "CRITICAL_WAIT_SHARE",
    "HANG_SAMPLES",
    "MIN_CRITICAL_STEPS",
    "UNEXPLAINED_SHARE",
    "WAITING_PHASES",
    "WAIT_SHARE",
    "RankRow",
    "StallWatch",
    "comm_findings",
    "hang_findings",
    "is_job_dir",
    "job_findings",
    "job_report",
    "rank_findings",
    "rank_record",
    "rank_row",
    "rank_rows",
    "stall_findings",
    "summarise_job",
    "summarise_rank",
]
