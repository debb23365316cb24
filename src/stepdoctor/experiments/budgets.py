"""How long the experiments may take: the defaults ``stepdoctor run`` shows in its help, read
before the job starts without loading the experiments themselves."""

from __future__ import annotations

__all__ = ["DEFAULT_BUDGET_S", "DEFAULT_SHARE"]

#: Total time the experiments may pause the job (the issue's --experiment-budget default).
DEFAULT_BUDGET_S = 30.0
#: The trials of ``run --verify`` may take this share of the job's own wall time (issue 23: at
#: most 20%).
DEFAULT_SHARE = 0.2
