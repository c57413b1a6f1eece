"""Building sharecon clients from the CLI's options, and checks several commands share."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from sharecon import errors
from sharecon.admin import Admin
from sharecon.cli._common import CliError, ExitCode
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Literal

    from sharecon.admin import TopicDescription
    from sharecon.cli._common import ClientOptions

__all__ = [
    "IdleTimer",
    "make_admin",
    "make_consumer",
    "make_producer",
    "require_topics",
    "set_earliest",
]


def make_admin(options: ClientOptions) -> Admin:
    """An Admin for ``options`` (not yet connected: use ``async with``)."""
    return Admin(options.bootstrap, **options.client_kwargs())


def make_producer(options: ClientOptions, **kwargs: Any) -> Producer:
    """A Producer for ``options``; a missing topic is reported after ``--timeout``."""
    kwargs.setdefault("metadata_timeout", options.timeout)
    return Producer(options.bootstrap, **options.client_kwargs(), **kwargs)


def make_consumer(
    options: ClientOptions,
    *,
    group: str,
    topics: Iterable[str],
    max_records: int = 500,
    ack_mode: Literal["implicit", "explicit"] = "explicit",
    acquire_mode: Literal["batch", "record_limit"] = "batch",
) -> ShareConsumer:
    """A ShareConsumer for ``options`` (explicit acknowledgements unless asked otherwise)."""
    return ShareConsumer(
        options.bootstrap,
        group_id=group,
        topics=list(topics),
        ack_mode=ack_mode,
        max_records=max_records,
        acquire_mode=acquire_mode,
        # Close must not wait the full request timeout when the broker is gone.
        close_timeout=min(options.timeout, 10.0),
        **options.client_kwargs(),
    )


async def require_topics(admin: Admin, names: Iterable[str]) -> dict[str, TopicDescription]:
    """Describe ``names``; a missing one is a not-found error naming it.

    Checked up front because a share consumer subscribed to a missing topic simply waits
    (the topic may be created later), which at a prompt looks like a hang.
    """
    wanted = list(dict.fromkeys(names))
    try:
        return await admin.describe_topics(wanted)
    except (errors.UnknownTopicOrPartitionError, errors.UnknownTopicIdError) as exc:
        missing = [n for n in wanted if repr(n) in str(exc)] or wanted
        raise CliError(
            f"topic {', '.join(repr(m) for m in missing)} does not exist", ExitCode.NOT_FOUND
        ) from exc


async def set_earliest(admin: Admin, group: str) -> None:
    """Make ``group`` start from the earliest records when it first reads a partition.

    :raises GroupAuthorizationFailedError: (or the cluster's) the principal may not alter
        the group's configs; the message names the ACL that is missing.
    """
    try:
        await admin.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    except (errors.GroupAuthorizationFailedError, errors.ClusterAuthorizationFailedError) as exc:
        # The same error class, with what to grant (docs/security.md).
        raise type(exc)(
            f"--earliest sets share.auto.offset.reset of group {group!r} (IncrementalAlterConfigs), "
            "which needs ALTER_CONFIGS on the group: grant it, or leave out --earliest and have "
            "an administrator set the group's share.auto.offset.reset"
        ) from exc


class IdleTimer:
    """Decides when a read-until-drained loop should stop.

    The clock starts once the consumer has an assignment (a new share group takes a moment
    to be assigned and to initialise its partitions) and restarts with every record.
    """

    def __init__(self, idle: float | None) -> None:
        self._idle = idle
        self._since: float | None = None

    def activity(self) -> None:
        """A record arrived."""
        self._since = time.monotonic()

    def expired(self, consumer: ShareConsumer) -> bool:
        """True when nothing arrived for ``idle`` seconds since the assignment or last record."""
        if self._idle is None:
            return False
        if self._since is None:
            if not consumer.assignment:
                return False
            self._since = time.monotonic()
        return time.monotonic() - self._since >= self._idle

    def poll_timeout(self) -> float:
        """How long one poll may wait before :meth:`expired` should be asked again."""
        if self._idle is None:
            return 1.0
        return max(min(self._idle, 0.5), 0.05)
