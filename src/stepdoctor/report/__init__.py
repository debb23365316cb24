"""The report of a run (``build_report``), what was measured put on its findings
(``measured``), and what a run folder keeps beside its record (``saved``)."""

from __future__ import annotations

from stepdoctor.report.build import (
    build_report,
    fold_trace,
    merge_duplicates,
    outcome,
    trace_findings,
)
from stepdoctor.report.measured import (
    attach_measurements,
    attach_tune,
    attach_verify,
    measure_command,
)
from stepdoctor.report.saved import (
    TRACE_FOLDER,
    VERIFY_FILE,
    trace_of_run,
    verify_of_run,
    write_verify,
)

__all__ = [
    "TRACE_FOLDER",
    "VERIFY_FILE",
    "attach_measurements",
    "attach_tune",
    "attach_verify",
    "build_report",
    "fold_trace",
    "measure_command",
    "merge_duplicates",
    "outcome",
    "trace_findings",
    "trace_of_run",
    "verify_of_run",
    "write_verify",
]
