"""Types of the C trace scanner (_scan.c); the Python way is loader.py's ijson loop."""

from collections.abc import Callable
from typing import Any, final

class InvalidError(ValueError): ...

@final
class Scanner:
    events: int
    odd_events: int
    first_ts: int | None
    @property
    def gpu(self) -> list[Any]: ...
    @property
    def launches(self) -> dict[int, Any]: ...
    @property
    def steps(self) -> list[tuple[str, int]]: ...
    @property
    def done(self) -> bool: ...
    def __init__(
        self,
        gpu_type: Callable[..., Any],
        launch_type: Callable[..., Any],
        take: Callable[[bytes], object],
    ) -> None: ...
    def feed(self, buffer: bytes, final: bool = False) -> int: ...
