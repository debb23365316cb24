"""Types of the C step reducer (_reduce.c); the Python twin is reducer.StepReducer."""

from collections.abc import Callable
from typing import Any, Final, final

from stepdoctor.collect.hooks.events import EventBuffer
from stepdoctor.model import StepTiming

ENTER: Final[int]
EXIT: Final[int]
STEP: Final[int]
OPT_END: Final[int]
FWD_ENTER: Final[int]
FWD_EXIT: Final[int]
GC_START: Final[int]
GC_STOP: Final[int]
READS_EVENT_STRUCTS: Final[int]

@final
class Reducer:
    @property
    def mode(self) -> str | None: ...
    @property
    def owner_thread(self) -> int: ...
    @property
    def model_names(self) -> dict[int, str]: ...
    def __init__(
        self,
        owner_thread: int,
        model_names: dict[int, str],
        step_type: type[Any],
        model_mode_after: int,
        encode: Callable[[object], bytes],
        *,
        keep_steps: bool = True,
    ) -> None: ...
    def feed(self, events: list[tuple[int, int, object, int]]) -> None: ...
    def drain(self, events: EventBuffer) -> None: ...
    def take_steps(self) -> list[StepTiming]: ...
    def take_rows(self) -> bytes: ...
    def take_marks(self) -> bytes: ...
    def take_sample_phases(self) -> list[tuple[object, str]]: ...
    def finish(self) -> list[StepTiming]: ...
    def model_calls(
        self,
    ) -> list[tuple[object, str, int, int, int, int, int, int, int, int, int]]: ...
