"""The only JSON (de)serialiser of stepdoctor's model types.

``to_jsonable`` turns a model dataclass into plain JSON values; ``from_jsonable`` builds it
back, tolerantly: unknown keys are ignored (a newer writer may add fields) and missing keys
take the field's default. ``SCHEMA_VERSION`` is written in every run record and report; bump
it when a field changes meaning or is removed, not when one is added.

Versions: 1, the first; 2, run records may hold items as rows (record/format.py), which a
reader of version 1 would have taken for empty lines; 3, a finding's ``speedup`` says its ``kind``
and ``basis`` (was ``method``) and is the measured figure where one was measured (the model then
in ``modelled``; ``measurement`` is gone).
"""

from __future__ import annotations

import dataclasses
import operator
import sys
import types
import typing
from collections.abc import Callable, Mapping
from enum import Enum
from functools import cache
from typing import Any, TypeVar, Union, get_args, get_origin

__all__ = [
    "SCHEMA_VERSION",
    "SchemaError",
    "fields_getter",
    "from_jsonable",
    "json_default",
    "to_jsonable",
]

SCHEMA_VERSION = 3

T = TypeVar("T")


class SchemaError(ValueError):
    """A JSON value does not fit the model type it should become."""


_SCALARS = frozenset({int, float, str, bool, type(None)})


def to_jsonable(value: Any) -> Any:
    """Return ``value`` (a model dataclass, enum, tuple, mapping or scalar) as JSON values.

    Runs on the monitor thread for every step written, so scalars are passed through by exact
    type before any recursion and a dataclass's fields are read with one cached getter
    (docs/overhead.md).
    """
    cls = type(value)
    if cls in _SCALARS:
        return value
    getter = fields_getter(cls)
    if getter is not None:
        names, get = getter
        return {
            name: v if type(v) in _SCALARS else to_jsonable(v)
            for name, v in zip(names, get(value), strict=True)
        }
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [v if type(v) in _SCALARS else to_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {
            k if type(k) is str else str(k): v if type(v) in _SCALARS else to_jsonable(v)
            for k, v in value.items()
        }
    return value


def json_default(value: Any) -> Any:
    """``json.dumps(obj, default=json_default)`` writes what ``json.dumps(to_jsonable(obj))``
    does, with the recursion left to json's C encoder: it is asked only about model
    dataclasses, non-str enums and mappings that are not dicts (the record writer's fast
    path: steps are written at every flush, docs/overhead.md)."""
    getter = fields_getter(type(value))
    if getter is not None:
        names, get = getter
        return dict(zip(names, get(value), strict=True))
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {k if type(k) is str else str(k): v for k, v in value.items()}
    raise TypeError(f"{type(value).__name__} is not a model type")


def from_jsonable(cls: type[T], data: Any) -> T:
    """Build a ``cls`` from JSON values; raise ``SchemaError`` when they do not fit."""
    result: T = _convert(cls, data, cls.__name__)
    return result


_Getter = tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]
_GETTERS: dict[type, _Getter | None] = {}


def fields_getter(cls: type) -> _Getter | None:
    """``(field names, getter of their values as a tuple)`` for a dataclass, else None.

    Looked up once per class: ``to_jsonable``, ``json_default`` and the record writer's rows
    use it for every step written."""
    try:
        return _GETTERS[cls]
    except KeyError:
        pass
    getter: _Getter | None = None
    if dataclasses.is_dataclass(cls):
        names = tuple(f.name for f in dataclasses.fields(cls))
        if len(names) == 1:
            (name,) = names
            getter = names, lambda obj: (getattr(obj, name),)
        else:
            getter = names, operator.attrgetter(*names)
    _GETTERS[cls] = getter
    return getter


class _Names(dict[str, Any]):
    """The names an annotation of a class may use (``eval``'s locals): its module's own, then
    stepdoctor.model's public names, each loaded when an annotation names it (a model module
    may import the types of its fields only for type checkers, so that importing it does not
    build every class a field can hold)."""

    def __missing__(self, name: str) -> Any:
        import stepdoctor.model

        if name not in stepdoctor.model.__all__:
            raise KeyError(name)
        return getattr(stepdoctor.model, name)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, localns=_Names(vars(sys.modules[cls.__module__])))


def _convert(tp: Any, data: Any, where: str) -> Any:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if data is None and type(None) in args:
            return None
        last: SchemaError | None = None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, data, where)
            except SchemaError as exc:
                last = exc
        raise last or SchemaError(f"{where}: no type fits {data!r}")
    if origin is tuple:
        if not isinstance(data, list):
            raise SchemaError(f"{where}: expected a list, got {type(data).__name__}")
        (item,) = get_args(tp)[:1]
        return tuple(_convert(item, v, f"{where}[{i}]") for i, v in enumerate(data))
    if origin in (Mapping, dict) or tp is dict:
        if not isinstance(data, dict):
            raise SchemaError(f"{where}: expected an object, got {type(data).__name__}")
        args = get_args(tp)
        value_tp = args[1] if len(args) == 2 else Any
        return {str(k): _convert(value_tp, v, f"{where}.{k}") for k, v in data.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(data, dict):
            raise SchemaError(f"{where}: expected an object, got {type(data).__name__}")
        hints = _hints(tp)
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(tp):
            if f.name in data:
                kwargs[f.name] = _convert(hints[f.name], data[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise SchemaError(f"{where}: missing field {f.name!r}")
        return tp(**kwargs)
    if isinstance(tp, type) and issubclass(tp, Enum):
        try:
            return tp(data)
        except ValueError as exc:
            raise SchemaError(f"{where}: {data!r} is not a {tp.__name__}") from exc
    return _scalar(tp, data, where)


def _scalar(tp: Any, data: Any, where: str) -> Any:
    if tp is Any:
        return data
    if tp is float:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data)
    elif tp is int:
        if isinstance(data, int) and not isinstance(data, bool):
            return data
    elif tp is bool or tp is str:
        if isinstance(data, tp):
            return data
    else:
        raise SchemaError(f"{where}: unsupported type {tp!r}")
    raise SchemaError(f"{where}: expected {tp.__name__}, got {data!r}")
