"""The AsyncAPI document of a share broker lists its share-group subscribers (their group
in the Kafka operation binding) and its publishers; import rules of the extra."""

from __future__ import annotations

import subprocess
import sys

import pytest
from faststream import AckPolicy
from faststream.specification import AsyncAPI
from pydantic import BaseModel

from sharecon.errors import ConfigError
from sharecon.faststream import DEFAULT_ACK_POLICY, ShareBroker


class Order(BaseModel):
    id: int
    total: float


def build() -> ShareBroker:
    broker = ShareBroker("kafka-1:9092,kafka-2:9092")

    @broker.subscriber("orders", group_id="billing", description="bills each order")
    @broker.publisher("invoices")
    async def bill(order: Order) -> dict[str, int]:
        return {"order": order.id}

    @broker.subscriber("a", "b", group_id="audit")
    async def audit(body: str) -> None: ...

    return broker


@pytest.mark.parametrize("version", ["3.0.0", "2.6.0"])
def test_asyncapi_lists_share_subscribers(version: str) -> None:
    doc = AsyncAPI(build(), title="billing", schema_version=version).to_specification()
    spec = doc.to_jsonable()
    channels = spec["channels"]
    assert set(channels) == {"orders:Bill", "invoices:Publisher", "a:Audit", "b:Audit"}
    payload_schemas = spec["components"]["schemas"]
    assert payload_schemas["Order"]["required"] == ["id", "total"]
    if version == "3.0.0":
        ops = spec["operations"]
        assert ops["orders:BillSubscribe"]["action"] == "receive"
        assert ops["orders:BillSubscribe"]["bindings"]["kafka"]["groupId"]["enum"] == ["billing"]
        assert ops["a:AuditSubscribe"]["bindings"]["kafka"]["groupId"]["enum"] == ["audit"]
        assert ops["invoices:Publisher"]["action"] == "send"
        assert channels["orders:Bill"]["address"] == "orders"
        assert {s["host"] for s in spec["servers"].values()} == {"kafka-1:9092", "kafka-2:9092"}
    else:
        # AsyncAPI 2: the app receives what clients "publish" to the channel.
        sub = channels["orders:Bill"]["publish"]
        assert sub["bindings"]["kafka"]["groupId"]["enum"] == ["billing"]
        assert channels["orders:Bill"]["description"] == "bills each order"
    assert {s["protocol"] for s in spec["servers"].values()} == {"kafka"}


def test_default_and_chosen_ack_policy() -> None:
    broker = ShareBroker("localhost:9092", ack_policy=AckPolicy.REJECT_ON_ERROR)
    default = ShareBroker("localhost:9092")
    a = broker.subscriber("t", group_id="g")
    b = broker.subscriber("t", group_id="g", ack_policy=AckPolicy.ACK)
    c = default.subscriber("t", group_id="g")
    assert a.share_ack_policy is AckPolicy.REJECT_ON_ERROR
    assert b.share_ack_policy is AckPolicy.ACK
    assert c.share_ack_policy is DEFAULT_ACK_POLICY is AckPolicy.NACK_ON_ERROR


@pytest.mark.parametrize(
    ("topics", "kwargs", "match"),
    [
        ((), {}, "topic names"),
        (("",), {}, "topic names"),
        (("t",), {"max_workers": 0}, "max_workers"),
    ],
)
def test_bad_subscriber_arguments(
    topics: tuple[str, ...], kwargs: dict[str, int], match: str
) -> None:
    broker = ShareBroker("localhost:9092")
    with pytest.raises(ConfigError, match=match):
        broker.subscriber(*topics, group_id="g", **kwargs)


def test_import_sharecon_does_not_import_faststream() -> None:
    code = (
        "import sys, sharecon\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in "
        "('faststream', 'fast_depends', 'sharecon.faststream')]\n"
        "import sharecon.faststream\n"
        "assert 'faststream' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
