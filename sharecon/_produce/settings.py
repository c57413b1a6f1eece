"""The producer's options, checked once: :func:`check_settings` gives :class:`Settings` or
raises :class:`~sharecon.errors.ConfigError` naming the wrong option."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sharecon import errors
from sharecon.protocol.compression import Codec

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sharecon._backoff import Backoff

__all__ = ["CODECS", "MAX_IN_FLIGHT", "Settings", "check_settings", "parse_codec"]

#: The most batches in flight per partition: what the broker remembers per producer to
#: recognise a resent batch (Java's limit on max.in.flight.requests.per.connection with
#: idempotence).
MAX_IN_FLIGHT = 5

#: The compression names ``compression=`` takes.
CODECS: Mapping[str, Codec] = {
    "none": Codec.NONE,
    "gzip": Codec.GZIP,
    "snappy": Codec.SNAPPY,
    "lz4": Codec.LZ4,
    "zstd": Codec.ZSTD,
}


@dataclass(frozen=True, slots=True)
class Settings:
    """The engine's options, checked (see :class:`sharecon.producer.Producer` for each)."""

    acks: int
    idempotent: bool
    codec: Codec
    compression_level: int | None
    linger: float
    max_batch: int
    max_request: int
    max_buffer: int
    max_in_flight: int
    delivery_timeout: float
    request_timeout: float
    metadata_timeout: float
    backoff: Backoff


def parse_codec(compression: object) -> Codec:
    """``compression=`` as a :class:`~sharecon.protocol.compression.Codec`.

    :raises ConfigError: an unknown name.
    """
    if compression is None:
        return Codec.NONE
    if isinstance(compression, Codec):
        return compression
    if isinstance(compression, str) and compression.lower() in CODECS:
        return CODECS[compression.lower()]
    raise errors.ConfigError(
        f"compression={compression!r}: expected one of {', '.join(CODECS)} (or None)"
    )


def _acks(acks: object) -> int:
    if acks in ("all", -1, "-1"):
        return -1
    if acks in (1, "1"):
        return 1
    if acks in (0, "0"):
        raise errors.ConfigError(
            "acks=0 is not supported: the broker sends no response, so no offset could "
            "be reported; use acks=1 or acks='all'"
        )
    raise errors.ConfigError(f"acks={acks!r}: expected 'all' (or -1) or 1")


def check_settings(
    *,
    acks: object,
    idempotent: bool,
    compression: object,
    compression_level: int | None,
    linger: float,
    max_batch_bytes: int,
    max_request_size: int,
    max_buffer_bytes: int,
    delivery_timeout: float,
    request_timeout: float,
    metadata_timeout: float,
    close_timeout: float,
    retry_backoff: Backoff,
    max_in_flight: int = 5,
) -> Settings:
    """The options of ``Producer(...)``, checked.

    :raises ConfigError: the first wrong option, named with its value.
    """
    ack = _acks(acks)
    if idempotent and ack != -1:
        raise errors.ConfigError("idempotent=True needs acks='all' (or pass idempotent=False)")
    codec = parse_codec(compression)
    for name, seconds in (
        ("delivery_timeout", delivery_timeout),
        ("request_timeout", request_timeout),
        ("metadata_timeout", metadata_timeout),
        ("close_timeout", close_timeout),
    ):
        if not seconds > 0:
            raise errors.ConfigError(f"{name}={seconds!r}: must be positive seconds")
    if not 0 <= linger < math.inf:
        raise errors.ConfigError(f"linger={linger!r}: must be 0 or more seconds")
    for name, size in (
        ("max_batch_bytes", max_batch_bytes),
        ("max_request_size", max_request_size),
        ("max_buffer_bytes", max_buffer_bytes),
    ):
        if not isinstance(size, int) or size < 1024:
            raise errors.ConfigError(f"{name}={size!r}: must be an int of at least 1024")
    if type(max_in_flight) is not int or not 1 <= max_in_flight <= MAX_IN_FLIGHT:
        # The broker keeps the last 5 batches of each producer to spot a resent one.
        raise errors.ConfigError(
            f"max_in_flight={max_in_flight!r}: must be an int from 1 to {MAX_IN_FLIGHT}"
        )
    if max_batch_bytes > max_request_size:
        raise errors.ConfigError(
            f"max_batch_bytes={max_batch_bytes} is larger than max_request_size={max_request_size}"
        )
    return Settings(
        acks=ack,
        idempotent=bool(idempotent),
        codec=codec,
        compression_level=compression_level,
        linger=float(linger),
        max_batch=max_batch_bytes,
        max_request=max_request_size,
        max_buffer=max_buffer_bytes,
        max_in_flight=max_in_flight,
        delivery_timeout=float(delivery_timeout),
        request_timeout=float(request_timeout),
        metadata_timeout=float(metadata_timeout),
        backoff=retry_backoff,
    )
