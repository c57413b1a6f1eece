"""KIP-714 client telemetry for every client (ShareConsumer, Producer, Admin): its metrics
pushed with GetTelemetrySubscriptions and PushTelemetry, as the brokers ask (the decisions
are :class:`sharecon._share.telemetry.TelemetryPlan`'s). The client's
:class:`~sharecon._lifecycle.ClientRuntime` runs the pusher in its task group and sends the
terminating push when it shuts down; the client only says what its metrics are
(:func:`metric_points`).

Rules of this module:

1. Nothing is sent to a broker that does not offer both APIs (Kafka before 3.7, or
   a broker whose ApiVersions leaves them out).
2. Requests go to any broker (:meth:`Cluster.request_any`); a broker that forgets the
   subscription answers UNKNOWN_SUBSCRIPTION_ID and the plan asks again.
3. Metrics are encoded uncompressed (compression type 0, which every broker takes) as
   OTLP ``MetricsData`` (:mod:`sharecon.protocol.otlp`). Counters are cumulative since
   the client started, or deltas since the previous push when the subscription asks.
4. Telemetry never fails the client: errors are logged (INFO, a stop at WARNING) and the
   plan decides what follows. Every request has a deadline.
5. Names: a metric of a Java group is named as the Java client names it for KIP-714:
   ``org.apache.kafka.`` + the group without its ``-metrics`` suffix + the metric's name,
   dashes turned to dots (``consumer-share-fetch-manager-metrics`` /
   ``records-consumed-total`` becomes
   ``org.apache.kafka.consumer.share.fetch.manager.records.consumed.total``;
   ``producer-metrics`` / ``record-send-total`` becomes
   ``org.apache.kafka.producer.record.send.total``). sharecon's own metrics are under
   ``org.sharecon.<client>.`` (``consumer``, ``producer``). Counters (``*-total``) are
   monotonic sums, the rest gauges.
6. ``enable_metrics_push`` must be a bool (:func:`check_enabled`).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import anyio

from sharecon import errors
from sharecon._share.telemetry import TelemetryAction, TelemetryPlan
from sharecon._version import __version__
from sharecon.protocol.messages import GetTelemetrySubscriptionsRequest, PushTelemetryRequest
from sharecon.protocol.otlp import CUMULATIVE, DELTA, MetricPoint, encode_metrics_data

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from sharecon._net.cluster import Cluster
    from sharecon.metrics import MetricInfo

__all__ = ["TelemetryPusher", "check_enabled", "metric_points", "telemetry_name"]

#: Seconds the terminating push may take when the client closes.
TERMINATE_TIMEOUT = 2.0


def check_enabled(value: object) -> bool:
    """``enable_metrics_push``, checked (rule 6).

    :raises ConfigError: it is not a bool.
    """
    if not isinstance(value, bool):
        raise errors.ConfigError(
            f"enable_metrics_push={value!r}: must be True or False, not {type(value).__name__}"
        )
    return value


def telemetry_name(info: MetricInfo, client: str = "consumer") -> str:
    """The KIP-714 (OTLP) name of one metric of a ``client`` (``consumer``, ``producer``,
    ``admin``): rule 5."""
    name = info.name.replace("-", ".")
    if info.group == "sharecon":
        return f"org.sharecon.{client}.{name}"
    group = info.group.removesuffix("-metrics").replace("-", ".")
    return f"org.apache.kafka.{group}.{name}"


def metric_points(
    table: Iterable[MetricInfo], client: str
) -> Callable[[object], list[MetricPoint]]:
    """A function giving every metric of a snapshot (one of :mod:`sharecon.metrics`'
    dataclasses, described by ``table``) as telemetry points; names are worked out once."""
    names = tuple((info, telemetry_name(info, client)) for info in table)

    def points(snapshot: object) -> list[MetricPoint]:
        return [
            MetricPoint(
                name,
                float(getattr(snapshot, info.field)),
                monotonic=info.kind == "counter",
                description=info.description,
                unit="" if info.unit == "1" else info.unit,
            )
            for info, name in names
        ]

    return points


class TelemetryPusher:
    """Pushes ``collect()``'s metrics while the broker's subscription asks for them.

    :param cluster: the client's cluster view.
    :param collect: every metric the client has now, under its OTLP name.
    :param resource: OTLP resource attributes (client id, group...).
    :param request_timeout: seconds per request.
    :param logger: the client's logger (its layer's).
    """

    def __init__(
        self,
        cluster: Cluster,
        collect: Callable[[], list[MetricPoint]],
        *,
        resource: Mapping[str, str],
        request_timeout: float,
        logger: logging.Logger,
        plan: TelemetryPlan | None = None,
    ) -> None:
        self._cluster = cluster
        self._log = logger
        self._collect = collect
        self._resource = {
            **resource,
            "client_software_name": "sharecon",
            "client_software_version": __version__,
        }
        self._timeout = request_timeout
        self.plan = plan or TelemetryPlan()
        self._started_ns = time.time_ns()
        self._last_ns = self._started_ns
        self._last_counts: dict[str, float] = {}
        #: Pushes answered without error (for health and tests).
        self.pushed = 0

    def supported(self) -> bool:
        """Whether the brokers speak both telemetry APIs (rule 1)."""
        versions = self._cluster.versions
        return versions.supports(GetTelemetrySubscriptionsRequest) and versions.supports(
            PushTelemetryRequest
        )

    async def run(self) -> None:
        """Subscribe and push until cancelled, the plan stops, or the client terminates."""
        if not self.supported():
            self._log.debug("telemetry: the brokers do not offer KIP-714 APIs; nothing to push")
            return
        plan = self.plan
        while True:
            action, due = plan.next(anyio.current_time())
            if action is None:
                if plan.disabled_reason is not None:
                    level = logging.DEBUG if plan.quiet else logging.WARNING
                    self._log.log(level, "telemetry: stopped: %s", plan.disabled_reason)
                return
            if due is not None:
                await anyio.sleep(max(0.0, due - anyio.current_time()))
            if plan.terminated:
                return
            if action is TelemetryAction.SUBSCRIBE:
                await self._subscribe()
            else:
                await self._push(terminating=False, timeout=self._timeout)

    async def terminate(self) -> None:
        """The client closes: one last push with ``terminating`` set, if subscribed (bounded,
        never raises)."""
        if self.plan.terminate():
            await self._push(terminating=True, timeout=TERMINATE_TIMEOUT)

    async def _subscribe(self) -> None:
        plan = self.plan
        try:
            with anyio.fail_after(self._timeout):
                resp = await self._cluster.request_any(
                    GetTelemetrySubscriptionsRequest(client_instance_id=plan.instance_id),
                    timeout=self._timeout,
                )
        except (errors.KafkaError, TimeoutError) as exc:
            self._log.info("telemetry: GetTelemetrySubscriptions failed: %s", exc)
            plan.on_subscription_failed(anyio.current_time(), str(exc) or type(exc).__name__)
            return
        plan.on_subscription(
            anyio.current_time(),
            error_code=resp.error_code,
            instance_id=resp.client_instance_id,
            subscription_id=resp.subscription_id,
            push_interval_ms=resp.push_interval_ms,
            max_bytes=resp.telemetry_max_bytes,
            delta=resp.delta_temporality,
            requested=resp.requested_metrics,
            compressions=resp.accepted_compression_types,
        )
        sub = plan.subscription
        if sub is not None:
            self._log.debug(
                "telemetry: subscription %d, every %g s, metrics %s",
                sub.subscription_id,
                sub.push_interval,
                list(sub.prefixes),
            )

    def payload(self, now_ns: int) -> bytes:
        """The metrics the subscription asks for, as OTLP ``MetricsData`` (rule 3)."""
        sub = self.plan.subscription
        delta = sub is not None and sub.delta
        points: list[MetricPoint] = []
        for p in self._collect():
            if sub is None or not sub.wants(p.name):
                continue
            if p.monotonic and delta:
                last = self._last_counts.get(p.name, 0.0)
                self._last_counts[p.name] = p.value
                p = MetricPoint(p.name, p.value - last, True, p.attributes, p.description, p.unit)
            points.append(p)
        start = self._last_ns if delta else self._started_ns
        data = encode_metrics_data(
            points,
            resource=self._resource,
            scope="sharecon",
            scope_version=__version__,
            start_ns=start,
            time_ns=now_ns,
            temporality=DELTA if delta else CUMULATIVE,
        )
        self._last_ns = now_ns
        return data

    async def _push(self, *, terminating: bool, timeout: float) -> None:
        plan = self.plan
        sub = plan.subscription
        if sub is None:
            return
        data = self.payload(time.time_ns())
        if sub.max_bytes > 0 and len(data) > sub.max_bytes:
            plan.disable(f"{len(data)} bytes of metrics exceed the broker's {sub.max_bytes}")
            self._log.warning("telemetry: stopped pushing: %s", plan.disabled_reason)
            return
        request = PushTelemetryRequest(
            client_instance_id=plan.instance_id,
            subscription_id=sub.subscription_id,
            terminating=terminating,
            compression_type=0,
            metrics=data,
        )
        try:
            with anyio.fail_after(timeout):
                resp = await self._cluster.request_any(request, timeout=timeout)
        except (errors.KafkaError, TimeoutError) as exc:
            self._log.info("telemetry: PushTelemetry failed: %s", exc)
            if not terminating:
                # Not the broker's answer: try again next interval (a new subscription
                # if the broker has forgotten ours).
                plan.on_pushed(anyio.current_time(), errors.ErrorCode.NONE)
            return
        if resp.error_code == errors.ErrorCode.NONE:
            self.pushed += 1
        else:
            self._log.info("telemetry: PushTelemetry answered error code %d", resp.error_code)
        if not terminating:
            plan.on_pushed(anyio.current_time(), resp.error_code)
