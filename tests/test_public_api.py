from __future__ import annotations

import subprocess
import sys

import stepdoctor


def test_all_is_sorted_and_complete() -> None:
    assert stepdoctor.__all__ == sorted(stepdoctor.__all__)
    for name in stepdoctor.__all__:
        assert hasattr(stepdoctor, name), name


def test_core_imports_and_works_without_torch() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import stepdoctor, stepdoctor.cli, stepdoctor.report, stepdoctor.render\n"
        "from stepdoctor.model import RunMeta, RunRecord\n"
        "r = stepdoctor.build_report(RunRecord(meta=RunMeta(run_id='x', started_unix_s=0)))\n"
        "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "print(len(r.skipped))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 0
