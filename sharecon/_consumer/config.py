"""ShareConsumer settings, checked once at construction.

Every field is checked for type and range here, so a wrong value fails at once with a
:class:`~sharecon.errors.ConfigError` naming the parameter, instead of later (an int32
field that will not encode) or never (a NaN deadline that never passes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

from sharecon.errors import ConfigError
from sharecon.protocol.names import check_protocol_string, validate_group_id, validate_topic_name

__all__ = [
    "INT32_MAX",
    "MAX_RECORDS_LIMIT",
    "MAX_SECONDS",
    "AckMode",
    "ConsumerConfig",
    "check_max_records",
    "topics_tuple",
]

AckMode = Literal["implicit", "explicit"]
#: ``"batch"``: the broker acquires whole batches (``max_records`` is a soft target);
#: ``"record_limit"``: never more than ``max_records`` held at once (Kafka 4.2+);
#: ``"auto"``: ``"record_limit"`` where the broker has it, else ``"batch"``.
AcquireMode = Literal["batch", "record_limit", "auto"]

#: Largest value of the protocol's int32 fields (MaxWaitMs, MinBytes, MaxBytes, MaxRecords).
INT32_MAX: Final = 2**31 - 1

#: Most records per fetch / per poll. The wire allows int32, but poll() builds a list of
#: this many records and the broker caps in-flight records per partition far lower, so a
#: larger value is a typo, not a tuning.
MAX_RECORDS_LIMIT: Final = 1_000_000

#: Longest timeout accepted, in seconds: Kafka's own timeouts are int32 milliseconds
#: (about 24.8 days); anything longer is "forever" in disguise.
MAX_SECONDS: Final = INT32_MAX / 1000


def check_int(param: str, value: object, low: int, high: int) -> int:
    """Return ``value`` if it is an ``int`` (not a ``bool``) in ``low..high``, else raise.

    :raises ConfigError: naming ``param``.
    """
    # bool is an int subclass: True would otherwise pass as 1.
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"{param} must be an int, not {type(value).__name__} {value!r}")
    if not low <= value <= high:
        raise ConfigError(f"{param} must be in {low}..{high}, not {value}")
    return value


def check_seconds(param: str, value: object) -> float:
    """Return ``value`` if it is a finite number of seconds in (0, :data:`MAX_SECONDS`].

    :raises ConfigError: naming ``param``, for bools, non-numbers, NaN, infinities, values
        <= 0 and values over :data:`MAX_SECONDS`.
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ConfigError(
            f"{param} must be a number of seconds, not {type(value).__name__} {value!r}"
        )
    # NaN compares false with everything, so it must be caught before the range check.
    if not math.isfinite(value):
        raise ConfigError(f"{param} must be a finite number of seconds, not {value}")
    if not 0 < value <= MAX_SECONDS:
        raise ConfigError(f"{param} must be more than 0 and at most {MAX_SECONDS} s, not {value}")
    return float(value)


def check_max_records(value: int | None, default: int) -> int:
    """The record limit for one ``poll()`` / ``batches()`` turn: ``value``, or ``default`` if None.

    ``0`` is an error, not "the default": only ``None`` means that.

    :raises ConfigError: naming ``max_records``, for 0, negatives, non-ints, bools and
        values over :data:`MAX_RECORDS_LIMIT`.
    """
    if value is None:
        return default
    return check_int("max_records", value, 1, MAX_RECORDS_LIMIT)


def topics_tuple(topics: object) -> tuple[str, ...]:
    """``ShareConsumer(topics=...)`` as a tuple; the names are checked by :class:`ConsumerConfig`.

    :raises ConfigError: naming ``topics``, for a single str (it would iterate into
        one-letter topics, each a legal name) or bytes, and for a non-iterable.
    """
    if isinstance(topics, (str, bytes)):
        raise ConfigError(f"topics must be a list of topic names, not a single name {topics!r}")
    if not isinstance(topics, Iterable):
        raise ConfigError(
            f"topics must be a list of topic names, not {type(topics).__name__} {topics!r}"
        )
    return tuple(topics)


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """Every tunable of a :class:`~sharecon.ShareConsumer` (see its docstring).

    :raises ConfigError: at construction, for any wrong value, naming the parameter.
    """

    group_id: str
    topics: tuple[str, ...]
    ack_mode: AckMode = "implicit"
    max_records: int = 500
    max_wait_ms: int = 500
    min_bytes: int = 1
    fetch_max_bytes: int = 50 * 1024 * 1024
    max_buffered_records: int = 0  # 0: 2 * max_records
    max_buffered_bytes: int = 0  # 0: fetch_max_bytes
    ack_linger: float = 0.1
    request_timeout: float = 30.0
    close_timeout: float = 30.0
    rack_id: str | None = None
    acquire_mode: AcquireMode = "batch"
    keep_locks: bool = False
    max_hold: float = 300.0
    max_poll_interval: float | None = 300.0

    def __post_init__(self) -> None:
        validate_group_id(self.group_id)
        self._check_topics()
        if self.ack_mode not in ("implicit", "explicit"):
            raise ConfigError(f"ack_mode must be 'implicit' or 'explicit', not {self.ack_mode!r}")
        check_int("max_records", self.max_records, 1, MAX_RECORDS_LIMIT)
        if self.acquire_mode not in ("batch", "record_limit", "auto"):
            raise ConfigError(
                f"acquire_mode must be 'batch', 'record_limit' or 'auto', not {self.acquire_mode!r}"
            )
        check_int("max_wait_ms", self.max_wait_ms, 0, INT32_MAX)
        check_int("min_bytes", self.min_bytes, 0, INT32_MAX)
        check_int("fetch_max_bytes", self.fetch_max_bytes, 1, INT32_MAX)
        # 0 means the default; otherwise the same ceilings as the values they default to
        # (twice max_records for the record bound).
        check_int("max_buffered_records", self.max_buffered_records, 0, 2 * MAX_RECORDS_LIMIT)
        check_int("max_buffered_bytes", self.max_buffered_bytes, 0, INT32_MAX)
        for name in ("ack_linger", "request_timeout", "close_timeout", "max_hold"):
            check_seconds(name, getattr(self, name))
        if self.max_poll_interval is not None:
            check_seconds("max_poll_interval", self.max_poll_interval)
        if not isinstance(self.keep_locks, bool):
            raise ConfigError(f"keep_locks must be True or False, not {self.keep_locks!r}")
        if self.rack_id is not None:
            if not isinstance(self.rack_id, str) or not self.rack_id:
                raise ConfigError(f"rack_id must be a non-empty str or None, not {self.rack_id!r}")
            check_protocol_string(self.rack_id, param="rack_id")

    def _check_topics(self) -> None:
        topics: object = self.topics
        # A str is a sequence of one-letter "topics": refuse it by name.
        if not isinstance(topics, tuple):
            raise ConfigError(
                f"topics must be a tuple of topic names, not {type(topics).__name__} {topics!r}"
            )
        if not topics:
            raise ConfigError("topics must name at least one topic")
        for t in topics:
            validate_topic_name(t, param="topics")

    @property
    def buffer_records(self) -> int:
        """Records held before fetching pauses."""
        return self.max_buffered_records or 2 * self.max_records

    @property
    def buffer_bytes(self) -> int:
        """Bytes held before fetching pauses."""
        return self.max_buffered_bytes or self.fetch_max_bytes
