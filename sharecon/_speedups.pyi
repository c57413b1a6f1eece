# Types of the compiled build's C module (sharecon/_speedups.c); sharecon._native loads it.
from typing import Any, final

@final
class RecordLayout:
    def __init__(self, cls: type[Any], /) -> None: ...

@final
class RecordMaker:
    def __init__(
        self,
        layout: RecordLayout,
        topic: str,
        partition: int,
        topic_partition: object,
        owner: object,
        lock_deadline: float | None,
        batch: object,
        /,
    ) -> None: ...
    def __call__(
        self, offset: int, timestamp: int, key: bytes | None, value: bytes | None, headers: Any, /
    ) -> Any: ...
