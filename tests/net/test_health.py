"""Broker reachability: one WARNING per outage longer than a request timeout, an INFO when it
ends, and a frozen status a health check can read (Cluster.health())."""

from __future__ import annotations

import logging
import socket
import struct
from types import MappingProxyType

import anyio
import anyio.abc
import pytest

from sharecon import errors
from sharecon._backoff import Backoff
from sharecon._net.cluster import Cluster, ClusterMetadata
from sharecon._net.connect import ConnectionConfig
from sharecon._net.connection import BrokerAddress
from sharecon._net.health import HealthTracker
from sharecon.protocol import ApiVersionsResponse, decode_request, encode_response, negotiate
from sharecon.protocol.messages.api_versions import ApiVersion
from sharecon.protocol.versions import CLIENT_VERSIONS

pytestmark = pytest.mark.anyio

HEALTH_LOGGER = "sharecon._net.health"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def warnings_and_infos(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [
        (r.levelno, r.getMessage())
        for r in caplog.records
        if r.name == HEALTH_LOGGER and r.levelno >= logging.INFO
    ]


# -- the tracker alone ----------------------------------------------------------------------


def test_one_warning_per_outage_and_an_info_when_it_ends(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=HEALTH_LOGGER)
    clock = FakeClock()
    tracker = HealthTracker(30.0, clock=clock, wall_clock=lambda: 1.7e9)
    where = "broker 2 (10.0.0.2:9092)"
    refused = errors.BrokerConnectError(f"{where} refused the connection")
    for _ in range(10):  # 45 s of failed reconnects, 5 s apart
        tracker.failed(2, where, refused)
        clock.now += 5
    assert warnings_and_infos(caplog) == [
        (logging.WARNING, f"{where} unreachable for 35.0 s; last error: refused the connection")
    ]
    status = tracker.snapshot(connected=True)
    assert not status.ok and status.connected
    (broker,) = status.brokers
    assert (broker.node_id, broker.address, broker.reachable) == (2, where, False)
    assert broker.unreachable_since == 1.7e9 and broker.unreachable_for == 50
    assert broker.last_error == f"{where} refused the connection"

    tracker.reached(2, where)
    assert warnings_and_infos(caplog)[-1] == (
        logging.INFO,
        f"{where} is reachable again after 50.0 s",
    )
    status = tracker.snapshot(connected=True)
    assert status.ok and status.brokers[0].reachable and status.brokers[0].unreachable_for == 0

    # A second outage warns again; a blip shorter than the threshold says nothing.
    caplog.clear()
    tracker.failed(2, where, refused)
    clock.now += 3
    tracker.failed(2, where, refused)
    tracker.reached(2, where)
    assert warnings_and_infos(caplog) == []


def test_whole_cluster_outage_names_the_addresses(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=HEALTH_LOGGER)
    clock = FakeClock()
    tracker = HealthTracker(10.0, clock=clock)
    last = errors.BrokerConnectError("h2:9092 timed out: the connection was not accepted")
    tracker.cluster_failed("broker 1 (h1:9092), h2:9092", last)
    clock.now += 11
    tracker.cluster_failed("broker 1 (h1:9092), h2:9092", last)
    status = tracker.snapshot(connected=True)
    assert not status.ok and status.unreachable_since is not None
    assert status.last_error == str(last)
    assert warnings_and_infos(caplog) == [
        (
            logging.WARNING,
            "no broker reachable for 11.0 s (tried broker 1 (h1:9092), h2:9092); last error: "
            "h2:9092 timed out: the connection was not accepted",
        )
    ]
    tracker.reached(1, "broker 1 (h1:9092)")
    assert warnings_and_infos(caplog)[-1] == (
        logging.INFO,
        "the cluster is reachable again after 11.0 s",
    )
    assert tracker.snapshot(connected=True).ok
    assert not tracker.snapshot(connected=False).ok


def test_brokers_that_left_the_cluster_are_not_reported() -> None:
    tracker = HealthTracker(1.0, clock=FakeClock())
    tracker.failed(1, "broker 1 (a:1)", OSError("x"))
    tracker.failed(2, "broker 2 (b:1)", OSError("x"))
    tracker.keep_only({2})
    assert [b.node_id for b in tracker.snapshot(connected=True).brokers] == [2]


def test_a_broker_no_longer_dialed_stops_counting_against_ok() -> None:
    """A broker that failed once and is not tried again (its partitions now led by others,
    as in the several-node whole-client simulation, seed 90) does not keep ``ok`` false
    for ever; one whose attempts keep failing does, past the request timeout."""
    clock = FakeClock()
    tracker = HealthTracker(10.0, clock=clock)
    tracker.reached(2, "broker 2 (b:1)")
    tracker.failed(1, "broker 1 (a:1)", OSError("refused"))
    clock.now += 5.0
    assert tracker.snapshot(connected=True).ok
    clock.now += 20.0  # nobody dialed broker 1 again
    health = tracker.snapshot(connected=True)
    assert health.ok
    assert not health.brokers[0].reachable  # still reported, with its last error
    assert health.brokers[0].unreachable_for == 25.0
    tracker.failed(3, "broker 3 (c:1)", OSError("refused"))
    for _ in range(12):  # retried every second, failing each time
        clock.now += 1.0
        tracker.failed(3, "broker 3 (c:1)", OSError("refused"))
    assert not tracker.snapshot(connected=True).ok
    clock.now += 10.5  # given up on: no attempt for longer than the request timeout
    assert tracker.snapshot(connected=True).ok


# -- through the cluster, real sockets ------------------------------------------------------


API_VERSIONS = ApiVersionsResponse(
    api_keys=[
        ApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in CLIENT_VERSIONS.items()
    ]
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def answer_api_versions(stream: anyio.abc.SocketStream) -> None:
    """Just enough of a broker for open_connection: ApiVersions with our own ranges."""
    buf = b""
    try:
        while True:
            while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
                buf += await stream.receive()
            size = struct.unpack(">i", buf[:4])[0]
            frame, buf = buf[4 : 4 + size], buf[4 + size :]
            header, _ = decode_request(frame)
            await stream.send(
                encode_response(18, header.api_version, header.correlation_id, API_VERSIONS)
            )
    except (anyio.EndOfStream, anyio.BrokenResourceError):
        pass
    finally:
        with anyio.CancelScope(shield=True):
            await stream.aclose()


async def test_a_broker_down_longer_than_a_request_timeout_warns_once_then_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=HEALTH_LOGGER)
    port = free_port()
    node = BrokerAddress("127.0.0.1", port, 1)
    config = ConnectionConfig(request_timeout=0.3, connect_timeout=1)
    quick = Backoff(initial=0.01, maximum=0.02)
    async with anyio.create_task_group() as tg:
        cluster = Cluster("127.0.0.1:1", config, tg, reconnect_backoff=quick, metadata_max_age=0)
        assert not cluster.health().ok and not cluster.health().connected
        # As if bootstrapped: the cluster knows broker 1, which then goes away.
        cluster._metadata = ClusterMetadata(brokers=MappingProxyType({1: node}))
        cluster._versions = negotiate(API_VERSIONS)
        assert cluster.health().ok
        with anyio.fail_after(5):
            with pytest.raises(errors.BrokerConnectError, match="refused"):
                await cluster.connection(1)
            # The outage began at that first refusal, before this: on a busy machine the
            # first attempt itself can take a while, and is not part of the 0.6 s.
            start = anyio.current_time()
            while anyio.current_time() - start < 0.6:  # the consumer retrying a dead leader
                with pytest.raises(errors.BrokerConnectError, match="refused"):
                    await cluster.connection(1)
        status = cluster.health()
        assert status.connected and not status.ok
        (broker,) = status.brokers
        assert not broker.reachable and broker.unreachable_for >= 0.5
        assert broker.last_error == f"{node} refused the connection"
        logged = warnings_and_infos(caplog)
        assert len(logged) == 1 and logged[0][0] == logging.WARNING
        assert logged[0][1].startswith(f"{node} unreachable for ")
        assert logged[0][1].endswith("; last error: refused the connection")

        # The broker comes back on the same port.
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
        tg.start_soon(listener.serve, answer_api_versions)
        with anyio.fail_after(5):
            await cluster.connection(1)
        level, message = warnings_and_infos(caplog)[-1]
        assert level == logging.INFO and message.startswith(f"{node} is reachable again after ")
        assert cluster.health().brokers[0].reachable and cluster.health().ok
        await cluster.aclose()
        tg.cancel_scope.cancel()
    await listener.aclose()


def test_a_broker_reached_by_id_ends_the_bootstrap_address_outage() -> None:
    # Once the cluster is found by node id, nobody dials the bootstrap address again: its
    # outage must not keep the status unhealthy forever.
    clock = FakeClock()
    tracker = HealthTracker(2.0, clock=clock, wall_clock=clock)
    tracker.failed(-1, "127.0.0.1:9092", OSError("refused"))
    tracker.failed(1, "broker 1 (127.0.0.1:9092)", OSError("refused"))
    clock.now += 10
    tracker.failed(-1, "127.0.0.1:9092", OSError("refused"))
    assert not tracker.snapshot(connected=True).ok
    tracker.reached(1, "broker 1 (127.0.0.1:9092)")
    snap = tracker.snapshot(connected=True)
    assert snap.ok and all(b.reachable for b in snap.brokers)
