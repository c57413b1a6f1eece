"""``sharecon.sync.Admin``: the admin client for blocking code (a façade over
:class:`sharecon.Admin` on the client's event-loop thread)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Concatenate, Generic, TypeVar, overload

from typing_extensions import ParamSpec

from sharecon.admin import Admin as AsyncAdmin
from sharecon.sync._client import BlockingClient

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from sharecon.sync._thread import Backend

__all__ = ["Admin"]

P = ParamSpec("P")
R = TypeVar("R")


class _Blocking(Generic[P, R]):
    """A method of the blocking Admin: the async method of the same name, called in the
    loop thread and waited for. Its parameters (``timeout`` included, which bounds the
    call in the loop) are the async method's."""

    def __init__(self, method: Callable[Concatenate[AsyncAdmin, P], Awaitable[R]]) -> None:
        self._method = method
        self.__doc__ = method.__doc__
        self.__wrapped__ = method

    @overload
    def __get__(self, admin: None, owner: type[Admin]) -> _Blocking[P, R]: ...
    @overload
    def __get__(self, admin: Admin, owner: type[Admin]) -> Callable[P, R]: ...
    def __get__(self, admin: Admin | None, owner: type[Admin]) -> Any:
        if admin is None:
            return self
        method = self._method

        @functools.wraps(method)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            engine = admin._engine
            return admin._running().call(
                functools.partial(method, engine, *args, **kwargs), what=method.__name__
            )

        return call


class Admin(BlockingClient[AsyncAdmin]):
    """The admin client for blocking code: :class:`sharecon.Admin` run on a background
    event-loop thread; every method of the async client, called without ``await``.

    ::

        with Admin("localhost:9092") as admin:
            admin.create_topics(["invoices"], num_partitions=3, exist_ok=True)
            admin.alter_group_config("billing", {"share.auto.offset.reset": "earliest"})

    Takes every parameter of :class:`sharecon.Admin`, plus ``backend`` and
    ``handle_sigterm`` as :class:`sharecon.sync.ShareConsumer`. Each call is bounded as
    the async call is: by its ``timeout`` argument where it has one, else by the client's
    ``request_timeout``.
    """

    _name = "Admin"

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        backend: Backend = "asyncio",
        handle_sigterm: bool = True,
        **options: Any,
    ) -> None:
        super().__init__(AsyncAdmin(bootstrap, **options), backend, handle_sigterm)

    describe_cluster = _Blocking(AsyncAdmin.describe_cluster)
    metadata = _Blocking(AsyncAdmin.metadata)
    list_topics = _Blocking(AsyncAdmin.list_topics)
    describe_topics = _Blocking(AsyncAdmin.describe_topics)
    create_topics = _Blocking(AsyncAdmin.create_topics)
    delete_topics = _Blocking(AsyncAdmin.delete_topics)
    list_offsets = _Blocking(AsyncAdmin.list_offsets)
    alter_group_config = _Blocking(AsyncAdmin.alter_group_config)
    describe_group_config = _Blocking(AsyncAdmin.describe_group_config)
    alter_configs = _Blocking(AsyncAdmin.alter_configs)
    describe_configs = _Blocking(AsyncAdmin.describe_configs)
    list_share_groups = _Blocking(AsyncAdmin.list_share_groups)
    describe_share_group = _Blocking(AsyncAdmin.describe_share_group)
    describe_share_group_offsets = _Blocking(AsyncAdmin.describe_share_group_offsets)
    alter_share_group_offsets = _Blocking(AsyncAdmin.alter_share_group_offsets)
    delete_share_group_offsets = _Blocking(AsyncAdmin.delete_share_group_offsets)
    delete_share_groups = _Blocking(AsyncAdmin.delete_share_groups)
