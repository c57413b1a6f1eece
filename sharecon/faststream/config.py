"""The share broker's settings, which its subscribers and publishers read, and its
access log."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from faststream._internal.configs import BrokerConfig
from faststream._internal.logger import DefaultLoggerStorage, make_logger_state
from faststream._internal.logger.logging import get_broker_logger

from sharecon.faststream.producer import ShareProducer

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from faststream._internal.basic_types import LoggerProto
    from faststream._internal.context.repository import ContextRepo
    from faststream._internal.logger import LoggerState

    from sharecon.config import ConnectionConfig


class _ShareLogStorage(DefaultLoggerStorage):
    """FastStream's access log for share subscribers: topic, group, message id."""

    def __init__(self) -> None:
        super().__init__()
        self._topic_len = 4
        self._group_len = 5
        self.logger_log_level = logging.INFO

    def set_level(self, level: int) -> None:
        self.logger_log_level = level

    def register_subscriber(self, params: dict[str, Any]) -> None:
        self._topic_len = max(self._topic_len, len(params.get("topic", "")))
        self._group_len = max(self._group_len, len(params.get("group_id", "")))

    def get_logger(self, *, context: ContextRepo) -> LoggerProto:
        lg = self._get_logger_ref()
        if lg is None:
            lg = get_broker_logger(
                name="sharecon",
                default_context={"topic": "", "group_id": ""},
                message_id_ln=10,
                fmt=(
                    "%(asctime)s %(levelname)-8s - "
                    f"%(topic)-{self._topic_len}s | %(group_id)-{self._group_len}s | "
                    "%(message_id)-10s - %(message)s"
                ),
                context=context,
                log_level=self.logger_log_level,
            )
            self._logger_ref.add(lg)
        return lg


@dataclass(kw_only=True)
class ShareBrokerConfig(BrokerConfig):
    """The broker's settings every subscriber and publisher reads."""

    bootstrap: str | Sequence[str] = "localhost:9092"
    connection: ConnectionConfig | None = None
    producer_options: Mapping[str, Any] = field(default_factory=dict)
    producer: ShareProducer = field(default_factory=ShareProducer)


def make_share_logger_state(logger: LoggerProto | None, log_level: int) -> LoggerState:
    """FastStream's logger state with the share broker's access-log format."""
    return make_logger_state(
        logger=logger, log_level=log_level, default_storage_cls=_ShareLogStorage
    )
