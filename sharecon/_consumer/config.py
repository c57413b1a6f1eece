"""ShareConsumer settings, checked once at construction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sharecon.errors import ConfigError

AckMode = Literal["implicit", "explicit"]


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """Every tunable of a :class:`~sharecon.ShareConsumer` (see its docstring)."""

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

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ConfigError("group_id must be a non-empty string")
        if self.ack_mode not in ("implicit", "explicit"):
            raise ConfigError(f"ack_mode must be 'implicit' or 'explicit', not {self.ack_mode!r}")
        for name in ("max_records", "fetch_max_bytes"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, not {getattr(self, name)}")
        if not 0 <= self.max_wait_ms <= 2**31 - 1:
            raise ConfigError(f"max_wait_ms must be 0..2147483647, not {self.max_wait_ms}")
        if self.min_bytes < 0 or self.max_buffered_records < 0 or self.max_buffered_bytes < 0:
            raise ConfigError("min_bytes and the buffer bounds must not be negative")
        for name in ("ack_linger", "request_timeout", "close_timeout"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive seconds, not {getattr(self, name)}")
        for t in self.topics:
            if not t or not isinstance(t, str):
                raise ConfigError(f"topic names must be non-empty strings, got {t!r}")

    @property
    def buffer_records(self) -> int:
        """Records held before fetching pauses."""
        return self.max_buffered_records or 2 * self.max_records

    @property
    def buffer_bytes(self) -> int:
        """Bytes held before fetching pauses."""
        return self.max_buffered_bytes or self.fetch_max_bytes
