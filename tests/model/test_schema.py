from __future__ import annotations

import pytest

from tests.builders import meta, steps
from traindoctor.model import (
    EnvFact,
    Finding,
    Fix,
    RunRecord,
    SchemaError,
    Severity,
    Speedup,
    from_jsonable,
    to_jsonable,
)


def test_round_trip_of_a_record_with_unions_and_enums() -> None:
    rec = RunRecord(
        meta=meta(),
        steps=steps(2, phases_ms={"forward": 1}),
        env=(
            EnvFact(key="a", value=True),
            EnvFact(key="b", value=2),
            EnvFact(key="c", value=None),
            EnvFact(key="d", value="x"),
        ),
    )
    assert from_jsonable(RunRecord, to_jsonable(rec)) == rec
    f = Finding(
        rule="r",
        severity=Severity.WARNING,
        title="t",
        explanation="e",
        evidence=(),
        speedup=Speedup(factor=1.5, method="m"),
        fix=Fix(summary="s"),
    )
    assert from_jsonable(Finding, to_jsonable(f)) == f


def test_unknown_keys_are_ignored_missing_required_ones_fail() -> None:
    data = to_jsonable(meta())
    data["from_the_future"] = 1
    assert from_jsonable(type(meta()), data) == meta()
    del data["run_id"]
    with pytest.raises(SchemaError, match="missing field 'run_id'"):
        from_jsonable(type(meta()), data)


def test_wrong_types_are_named() -> None:
    with pytest.raises(SchemaError, match=r"RunMeta.cpu_count: expected int"):
        from_jsonable(type(meta()), {**to_jsonable(meta()), "cpu_count": "four"})
