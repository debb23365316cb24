"""Types of the C hooks (_hotpath.c); the Python twins are in autoinstrument.py."""

from collections.abc import Callable
from typing import Any, Final, final

ENTER: Final[int]
EXIT: Final[int]
OPT_END: Final[int]
FWD_ENTER: Final[int]
FWD_EXIT: Final[int]
GC_START: Final[int]
GC_STOP: Final[int]

@final
class Events:
    """The hot path's events as C structs (events.EventQueue is its twin)."""

    def append(self, event: tuple[int, int, object, int], /) -> None: ...
    def take(self) -> list[tuple[int, int, object, int]]: ...
    def clear(self) -> None: ...
    def __len__(self) -> int: ...

@final
class Hook:
    after: Callable[[Any, Any], object] | None
    __wrapped__: Any
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __get__(self, obj: object, owner: type | None = None) -> Any: ...

_Append = Callable[[tuple[int, int, object, int]], object]
_Clock = Callable[[], int]

def phase(original: Callable[..., Any], phase: str, append: _Append, clock: _Clock) -> Hook: ...
def next(
    original: Callable[..., Any],
    phase: str,
    append: _Append,
    clock: _Clock,
    after: Callable[[Any, Any], object] | None,
) -> Hook: ...
def forward(
    original: Callable[..., Any],
    append: _Append,
    clock: _Clock,
    busy: set[int],
    models: dict[int, Any],
    first_call: Callable[..., object],
    grad_enabled: Callable[[], bool],
) -> Hook: ...
def mark(code: int, arg: object, append: _Append, clock: _Clock) -> Hook: ...
def mark_id(code: int, append: _Append, clock: _Clock) -> Hook: ...
def gc(append: _Append, clock: _Clock) -> Hook: ...
def batch_size_of(batch: object) -> int | None: ...
