"""One lifecycle for ShareConsumer, Producer and Admin: ``async with``, ``start()`` and
``aclose()``; the same errors before start, after close and on a second start; closing is
idempotent. Under asyncio and trio."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from sharecon import Admin, Producer, ShareConsumer, errors

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])]

Client = ShareConsumer[Any, Any] | Producer[Any, Any] | Admin

#: One call per client that needs it running (all of them are refused alike).
USES: dict[type[Any], list[Callable[[Any], Awaitable[object]]]] = {
    ShareConsumer: [
        lambda c: c.poll(0),
        lambda c: c.commit(),
        lambda c: c.lock_duration(),
        lambda c: c.__aiter__().__anext__(),
        lambda c: _sync(c.subscribe, ["t"]),
        lambda c: _sync(c.unsubscribe),
    ],
    Producer: [
        lambda p: p.send("t", b"v"),
        lambda p: p.flush(),
        lambda p: p.partitions_for("t"),
    ],
    Admin: [
        lambda a: a.describe_cluster(),
        lambda a: a.list_topics(),
        lambda a: a.describe_share_group("g"),
    ],
}


async def _sync(fn: Callable[..., object], *args: object) -> object:
    return fn(*args)


def _make(kind: type[Any], bootstrap: str, group: str = "lifecycle") -> Client:
    if kind is ShareConsumer:
        return ShareConsumer(bootstrap, group_id=group, topics=["t"])
    client: Client = kind(bootstrap)
    return client


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("kind", [ShareConsumer, Producer, Admin])
async def test_every_use_before_start_raises_client_not_started(
    kind: type[Any], anyio_backend: str
) -> None:
    client = _make(kind, "127.0.0.1:9")
    for use in USES[kind]:
        with pytest.raises(errors.ClientNotStartedError, match=f"{kind.__name__} is not started"):
            await use(client)


@pytest.mark.parametrize("kind", [ShareConsumer, Producer, Admin])
async def test_close_before_start_closes_for_good(kind: type[Any], anyio_backend: str) -> None:
    client = _make(kind, "127.0.0.1:9")
    await client.aclose()
    await client.aclose()  # idempotent
    with pytest.raises(errors.ClientClosedError, match="make a new"):
        await client.start()
    with pytest.raises(errors.ClientClosedError):
        await USES[kind][0](client)


@pytest.mark.parametrize("kind", [ShareConsumer, Producer, Admin])
async def test_a_failed_start_leaves_the_client_closed(kind: type[Any], anyio_backend: str) -> None:
    client = _make(kind, _closed_port())
    with pytest.raises(errors.BrokerConnectError):
        async with client:
            pass  # pragma: no cover - never reached
    with pytest.raises(errors.ClientClosedError):
        await client.start()
    await client.aclose()


@pytest.mark.broker
@pytest.mark.parametrize("kind", [ShareConsumer, Producer, Admin])
async def test_start_aclose_and_use_after_close(
    kind: type[Any], anyio_backend: str, kafka_bootstrap: str, share_group: str
) -> None:
    client = _make(kind, kafka_bootstrap, share_group)
    await client.start()
    try:
        with pytest.raises(errors.ClientStateError, match="already called") as second:
            await client.start()
        assert type(second.value) is errors.ClientStateError
        with pytest.raises(errors.ClientStateError, match="already called"):
            async with client:
                pass  # pragma: no cover - never reached
    finally:
        await client.aclose()
    await client.aclose()  # idempotent
    for use in USES[kind]:
        with pytest.raises(errors.ClientClosedError, match=f"{kind.__name__} is closed"):
            await use(client)
    if isinstance(client, ShareConsumer):
        # Read-only views still answer after close.
        health = client.health()
        assert not health.running and not health.ok
        assert client.member_id and isinstance(client.recent_errors, list)
    with pytest.raises(errors.ClientClosedError):
        await client.start()
    with pytest.raises(errors.ClientClosedError):
        async with client:
            pass  # pragma: no cover - never reached


@pytest.mark.broker
@pytest.mark.parametrize("kind", [ShareConsumer, Producer, Admin])
async def test_async_with_is_start_and_aclose(
    kind: type[Any], anyio_backend: str, kafka_bootstrap: str, share_group: str
) -> None:
    async with _make(kind, kafka_bootstrap, share_group) as client:
        assert client is not None
    for use in USES[kind][:1]:
        with pytest.raises(errors.ClientClosedError):
            await use(client)


@pytest.mark.broker
async def test_an_iteration_in_progress_ends_when_the_consumer_closes(
    anyio_backend: str, kafka_bootstrap: str, share_group: str, topic: str
) -> None:
    """Closing ends ``async for`` and a waiting ``poll`` in other tasks cleanly (the
    consumer started and closed by the task that owns it, at the same level)."""
    consumer = ShareConsumer(kafka_bootstrap, group_id=share_group, topics=[topic])
    ended: list[str] = []

    async def iterate() -> None:
        async for _ in consumer:
            pass  # pragma: no cover - the topic is empty
        ended.append("async for")

    async def poll() -> None:
        assert await consumer.poll(None) == []
        ended.append("poll")

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            await consumer.start()
            tg.start_soon(iterate)
            tg.start_soon(poll)
            await anyio.wait_all_tasks_blocked()
            await consumer.aclose()
    assert sorted(ended) == ["async for", "poll"]


#: One call per client that succeeds while it runs (with no topic needed).
WORKS: dict[type[Any], Callable[[Any], Awaitable[object]]] = {
    ShareConsumer: lambda c: c.poll(0),
    Producer: lambda p: p.flush(),
    Admin: lambda a: a.describe_cluster(),
}


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or ``exc`` itself."""
    inner = getattr(exc, "exceptions", None)
    return [exc] if inner is None else [leaf for e in inner for leaf in _leaves(e)]


@pytest.mark.broker
@pytest.mark.parametrize("kind", [ShareConsumer, Producer, Admin])
async def test_start_as_a_task_of_its_own_is_refused_naming_the_rule(
    kind: type[Any], anyio_backend: str, kafka_bootstrap: str, share_group: str
) -> None:
    """``tg.start_soon(client.start)``: the task would end holding the client's task group
    (anyio's "cancel scope that isn't the current task's" before). Refused before anything
    is entered, so the client is still new and starts fine the documented way."""
    client = _make(kind, kafka_bootstrap, share_group)
    with pytest.raises(BaseException) as info:  # an exception group: unpacked below
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.start)
    (error,) = _leaves(info.value)
    assert type(error) is errors.ClientStateError, repr(error)
    assert "start() and aclose() must run in the same task" in str(error)
    assert f"{kind.__name__}.start() runs as a task of its own" in str(error)
    async with client:
        await WORKS[kind](client)


@pytest.mark.broker
@pytest.mark.parametrize("kind", [ShareConsumer, Producer, Admin])
async def test_close_from_another_task_is_refused_and_the_client_keeps_running(
    kind: type[Any], anyio_backend: str, kafka_bootstrap: str, share_group: str
) -> None:
    client = _make(kind, kafka_bootstrap, share_group)
    await client.start()
    try:
        refused: list[BaseException] = []

        async def close_elsewhere() -> None:
            try:
                await client.aclose()
            except errors.ClientStateError as exc:
                refused.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(close_elsewhere)
        (error,) = refused
        assert "closed in another task than the one that started it" in str(error)
        assert "start() and aclose() must run in the same task" in str(error)
        await WORKS[kind](client)  # still running
    finally:
        await client.aclose()  # from the task that started it: closes
    with pytest.raises(errors.ClientClosedError):
        await USES[kind][0](client)
