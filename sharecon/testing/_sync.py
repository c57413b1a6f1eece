"""Run one sharecon Admin call to completion from synchronous test-support code."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

import anyio

from sharecon.admin import Admin

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

T = TypeVar("T")


def with_admin(bootstrap: str, call: Callable[[Admin], Awaitable[T]], timeout: float = 60.0) -> T:
    """Connect an :class:`~sharecon.admin.Admin` to ``bootstrap``, await ``call(admin)``, close.

    A private thread owns the event loop, so this works whether or not the caller itself
    runs in one (anyio's pytest plugin, trio, plain asyncio).
    """

    async def main() -> T:
        with anyio.fail_after(timeout):
            async with Admin(bootstrap) as admin:
                return await call(admin)

    with ThreadPoolExecutor(1, thread_name_prefix="sharecon-testing") as pool:
        return pool.submit(anyio.run, main).result(timeout=timeout + 30)
