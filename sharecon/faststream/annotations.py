"""Handler argument annotations the share broker injects (FastStream's context)::

from sharecon.faststream.annotations import ShareMessage

@broker.subscriber("orders", group_id="billing")
async def handle(order: Order, msg: ShareMessage) -> None:
    if msg.delivery_count > 1: ...
"""

from __future__ import annotations

from typing import Annotated

from faststream import Context

from sharecon.faststream.broker import ShareBroker as _Broker
from sharecon.faststream.message import ShareMessage as _Message

__all__ = ["ShareBroker", "ShareMessage"]

#: The message being handled (:class:`sharecon.faststream.ShareMessage`).
ShareMessage = Annotated[_Message, Context("message")]
#: The broker the handler runs in.
ShareBroker = Annotated[_Broker, Context("broker")]
