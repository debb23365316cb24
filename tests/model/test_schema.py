from __future__ import annotations

import pytest

from stepdoctor.model import (
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
from tests.builders import meta, steps


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
        speedup=Speedup(factor=1.5, basis="m"),
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


def test_json_default_writes_what_to_jsonable_writes() -> None:
    import json
    from types import MappingProxyType

    from stepdoctor.model import ProcessUsage, SystemSample, json_default

    f = Finding(
        rule="r",
        severity=Severity.CRITICAL,
        title="t <b>",
        explanation="e",
        evidence=(),
        speedup=Speedup(factor=1.5, basis="m"),
        fix=Fix(summary="s"),
    )
    sample = SystemSample(
        t_ns=5,
        cpu_pct_per_core=(1.0, 2.5),
        top_others=(ProcessUsage(pid=3, name="x", cpu_pct=7.0),),
        main_heap_bytes=1 << 40,
    )
    odd = MappingProxyType({"a": 1, 2: (3, 4)})
    values = [*steps(3, phases_ms={"forward": 1, "data_wait": 2}), f, sample, odd, Severity.INFO]
    for value in values:
        fast = json.dumps(value, default=json_default, sort_keys=True)
        assert fast == json.dumps(to_jsonable(value), sort_keys=True), value
    with pytest.raises(TypeError):
        json.dumps(object(), default=json_default)
