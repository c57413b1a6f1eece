"""The conformance scripts: each one question about share-group semantics.

Every scenario runs on its own topic (one partition) and group with
``share.auto.offset.reset=earliest``; the broker's delivery count limit is Kafka's default, 5.
Lock-expiry scenarios use a 3 s lock (a test broker allows 1 s; 3 s keeps loaded
machines inside it) and wait 3.6 s.
"""

from __future__ import annotations

from sharecon.testing.conformance.scenario import (
    ACCEPT,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    Ack,
    CloseOld,
    Disconnect,
    Fetch,
    LookUp,
    MoveLeader,
    NewSession,
    Produce,
    Scenario,
    StartLeader,
    StopLeader,
    Wait,
)

__all__ = ["CLUSTER_SCENARIOS", "SCENARIOS", "cluster_scenarios_for", "scenarios_for"]

# Short enough to wait out, long enough that a loaded machine (load average 10 on two
# cores, the fake serving 50 scenarios at once) finishes a fetch-answer round well inside
# it: a 1 s lock was sometimes over before the answer to its fetch was acknowledged.
SHORT_LOCK = 3000
EXPIRE = Wait(3.6)
# How long a real broker may take to show a release it persists (a final fetch or
# acknowledgement releases what the session held): well inside the default 10 s lock, so
# a record that came back by its lock's end instead (count 2, not 1) still disagrees.
RELEASE_PATIENCE = 6.0


def _release_rounds(member: str, first: int, last: int, rounds: int) -> tuple[Ack | Fetch, ...]:
    """``rounds`` times: release ``first..last``, then fetch them again.

    (Separate requests: a fetch carrying the release finds the records still being
    persisted and waits its whole ``max_wait_ms`` on a real broker.)"""
    steps: list[Ack | Fetch] = []
    for _ in range(rounds):
        steps += [Ack(member, ((first, last, RELEASE),)), Fetch(member)]
    return tuple(steps)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("fetch-all", (Produce(5), Fetch("a"))),
    Scenario(
        "accept-is-final",
        (
            Produce(3),
            Fetch("a"),
            Fetch("a", acks=((0, 2, ACCEPT),), expect=False),
            Fetch("b", expect=False),
        ),
    ),
    Scenario("release-redelivers", (Produce(3), Fetch("a"), Fetch("a", acks=((0, 2, RELEASE),)))),
    Scenario(
        "mixed-answers",
        (
            Produce(3),
            Fetch("a"),
            Fetch("a", acks=((0, 0, ACCEPT), (1, 1, REJECT), (2, 2, RELEASE))),
        ),
    ),
    Scenario(
        "release-part-of-batch",
        (
            Produce(4),
            Fetch("a"),
            Fetch("a", acks=((0, 0, ACCEPT), (1, 2, RELEASE), (3, 3, ACCEPT))),
        ),
    ),
    Scenario(
        "lock-expiry-redelivers",
        (Produce(2), Fetch("a"), EXPIRE, Fetch("b")),
        lock_ms=SHORT_LOCK,
    ),
    Scenario(
        "ack-after-expiry-fails",
        (Produce(1), Fetch("a"), EXPIRE, Ack("a", ((0, 0, ACCEPT),)), Fetch("a")),
        lock_ms=SHORT_LOCK,
    ),
    Scenario(
        "expiry-after-partial-accept",
        (Produce(3), Fetch("a"), Ack("a", ((0, 0, ACCEPT),)), EXPIRE, Fetch("b")),
        lock_ms=SHORT_LOCK,
    ),
    Scenario(
        "late-ack-after-redelivery",
        (
            Produce(1),
            Fetch("a"),
            EXPIRE,
            Fetch("b"),
            Ack("a", ((0, 0, ACCEPT),)),
            Ack("b", ((0, 0, ACCEPT),)),
        ),
        lock_ms=SHORT_LOCK,
    ),
    Scenario(
        "late-ack-after-the-other-accepted",
        (
            Produce(1),
            Fetch("a"),
            EXPIRE,
            Fetch("b"),
            Ack("b", ((0, 0, ACCEPT),)),
            # Below the share-partition start offset now: Kafka skips the batch and
            # answers 0 without looking at who holds it (so an answer of 0 does not
            # prove that this member's acceptance was the one applied).
            Ack("a", ((0, 0, ACCEPT),)),
        ),
        lock_ms=SHORT_LOCK,
    ),
    Scenario(
        "late-ack-after-the-other-accepted-start-held",
        (
            Produce(2),
            Fetch("a"),
            EXPIRE,
            Fetch("b"),
            Ack("b", ((1, 1, ACCEPT),)),
            # Offset 0 is still held, so the start offset stays: the late ack is checked.
            Ack("a", ((1, 1, ACCEPT),)),
            Ack("b", ((0, 0, ACCEPT),)),
        ),
        lock_ms=SHORT_LOCK,
    ),
    Scenario(
        "ack-of-other-members-record",
        (Produce(2), Fetch("a"), Fetch("b", expect=False), Ack("b", ((0, 0, ACCEPT),))),
    ),
    Scenario(
        "ack-of-unacquired-offset",
        (Produce(1, batches=2), Fetch("a", max_records=1), Ack("a", ((1, 1, ACCEPT),))),
    ),
    Scenario(
        "accept-twice",
        (Produce(1), Fetch("a"), Ack("a", ((0, 0, ACCEPT),)), Ack("a", ((0, 0, ACCEPT),))),
    ),
    Scenario("batch-mode-soft-limit", (Produce(5), Fetch("a", max_records=2))),
    Scenario(
        "batch-mode-max-records-over-batches",
        (Produce(1, batches=5), Fetch("a", max_records=3), Fetch("a", max_records=3)),
    ),
    Scenario(
        "record-limit-mode",
        (
            Produce(5),
            Fetch("a", max_records=2, record_limit=True),
            Fetch("a", max_records=2, record_limit=True),
        ),
        min_minor=2,
    ),
    Scenario(
        "record-limit-across-batches",
        (Produce(3, batches=2), Fetch("a", max_records=4, record_limit=True)),
        min_minor=2,
    ),
    Scenario(
        "two-members-share",
        (
            Produce(1, batches=4),
            Fetch("a", max_records=2),
            Fetch("b", max_records=2),
            Fetch("c", expect=False),
        ),
    ),
    Scenario(
        "delivery-limit-archives",
        (
            Produce(1),
            Fetch("a"),
            *_release_rounds("a", 0, 0, 4),
            Ack("a", ((0, 0, RELEASE),)),
            Fetch("a", expect=False),
            Fetch("b", expect=False),
        ),
    ),
    Scenario(
        "delivery-limit-by-expiry",
        (Produce(1), Fetch("a"), *_release_rounds("a", 0, 0, 4), EXPIRE, Fetch("b", expect=False)),
        lock_ms=SHORT_LOCK,
    ),
    Scenario(
        "last-attempts-single-batches",
        (
            Produce(1, batches=3),
            Fetch("a"),
            *_release_rounds("a", 0, 2, 2),
            *_release_rounds("a", 0, 2, 1),
            Ack("a", ((0, 0, RELEASE),)),
            Fetch("a"),
            Ack("a", ((0, 0, RELEASE),)),
            Fetch("b"),
            Fetch("c"),
        ),
    ),
    Scenario(
        "last-attempts-one-batch",
        (
            Produce(3),
            Fetch("a"),
            *_release_rounds("a", 0, 2, 2),
            *_release_rounds("a", 0, 2, 1),
            Fetch("b"),
            Fetch("c", expect=False),
        ),
    ),
    Scenario(
        "throttle-halves-a-big-batch",
        (Produce(8), Fetch("a"), *_release_rounds("a", 0, 7, 2), Fetch("b", expect=False)),
    ),
    Scenario(
        "disconnect-releases",
        (Produce(2), Fetch("a"), Disconnect("a"), Fetch("b")),
    ),
    Scenario(
        "disconnect-after-accept",
        (Produce(3), Fetch("a"), Ack("a", ((0, 0, ACCEPT),)), Disconnect("a"), Fetch("b")),
    ),
    Scenario(
        "disconnect-one-of-two",
        (
            Produce(1, batches=2),
            Fetch("a", max_records=1),
            Fetch("b", max_records=1),
            Disconnect("a"),
            Fetch("c"),
            Ack("b", ((1, 1, ACCEPT),)),
        ),
    ),
    Scenario(
        "disconnect-at-delivery-limit",
        (Produce(1), Fetch("a"), *_release_rounds("a", 0, 0, 4), Disconnect("a"), Fetch("b")),
    ),
    Scenario(
        "final-fetch-releases",
        (
            Produce(2),
            Fetch("a"),
            Fetch("a", acks=((0, 0, ACCEPT),), final=True),
            Wait(0.3),
            Fetch("b", patience=RELEASE_PATIENCE),
        ),
    ),
    Scenario(
        "final-ack-releases",
        (
            Produce(2),
            Fetch("a"),
            Ack("a", ((0, 0, ACCEPT),), final=True),
            Wait(0.3),
            Fetch("b", patience=RELEASE_PATIENCE),
        ),
    ),
    Scenario(
        "fetch-wrong-epoch",
        (
            Produce(1),
            Fetch("a"),
            Fetch("a", epoch=7, expect=False),
            Fetch("a", expect=False),
            Ack("a", ((0, 0, ACCEPT),)),
        ),
    ),
    Scenario("fetch-unknown-session", (Produce(1), Fetch("a", epoch=3, expect=False))),
    Scenario("final-fetch-unknown-session", (Fetch("a", final=True),)),
    Scenario(
        "ack-initial-epoch",
        (Produce(1), Fetch("a"), Ack("a", ((0, 0, ACCEPT),), epoch=0)),
    ),
    Scenario(
        "ack-wrong-epoch",
        (Produce(1), Fetch("a"), Ack("a", ((0, 0, ACCEPT),), epoch=9), Ack("a", ((0, 0, ACCEPT),))),
    ),
    Scenario("ack-unknown-session", (Produce(1), Ack("a", ((0, 0, ACCEPT),), epoch=1))),
    Scenario(
        "initial-fetch-with-acks",
        (Produce(1), Fetch("a", acks=((0, 0, ACCEPT),), expect=False)),
    ),
    Scenario(
        "new-session-keeps-locks",
        (
            Produce(2),
            Fetch("a"),
            NewSession("a"),
            Fetch("a", expect=False),
            Fetch("b", expect=False),
            Ack("a", ((0, 1, ACCEPT),)),
        ),
    ),
    # The connection of a replaced session closes: on 4.1 it ends the member's new
    # session too (SHARE_SESSION_NOT_FOUND for the next request, the locks released);
    # from 4.2 (KAFKA-19950) the close of a replaced session's connection is ignored.
    Scenario(
        "old-connection-closed-after-new-session",
        (
            Produce(2),
            Fetch("a"),
            NewSession("a"),
            Fetch("a", expect=False),
            CloseOld("a"),
            Ack("a", ((0, 1, ACCEPT),)),
        ),
    ),
    Scenario(
        "renew-extends-lock",
        (
            Produce(1),
            Fetch("a"),
            Wait(1.5),  # renewed half-way through the lock
            Ack("a", ((0, 0, RENEW),), renew=True),
            Wait(2.25),  # 0.75 s past the first lock's end, 0.75 s before the renewed one's
            Ack("a", ((0, 0, ACCEPT),)),
            Fetch("b", expect=False),
        ),
        lock_ms=SHORT_LOCK,
        min_minor=2,
    ),
    Scenario(
        "renew-in-fetch",
        (
            Produce(1),
            Fetch("a"),
            Fetch("a", acks=((0, 0, RENEW),), renew=True),
            Fetch("b", expect=False),
        ),
        min_minor=2,
    ),
    Scenario(
        "reject-all",
        (Produce(2), Fetch("a"), Ack("a", ((0, 1, REJECT),)), Fetch("b", expect=False)),
    ),
    Scenario(
        "release-to-another-member",
        (Produce(2), Fetch("a"), Ack("a", ((0, 1, RELEASE),)), Fetch("b")),
    ),
    Scenario(
        "gap-acknowledgement-archives",
        (Produce(2), Fetch("a"), Ack("a", ((0, 0, GAP), (1, 1, ACCEPT))), Fetch("b", expect=False)),
    ),
    Scenario(
        "unknown-acknowledge-type",
        (Produce(1), Fetch("a"), Ack("a", ((0, 0, 7),)), Ack("a", ((0, 0, ACCEPT),))),
    ),
    Scenario(
        "renew-after-expiry",
        (Produce(1), Fetch("a"), EXPIRE, Ack("a", ((0, 0, RENEW),), renew=True), Fetch("b")),
        lock_ms=SHORT_LOCK,
        min_minor=2,
    ),
    Scenario(
        "renew-disabled",
        (
            Produce(1),
            Fetch("a"),
            Ack("a", ((0, 0, RENEW),), renew=True),
            Ack("a", ((0, 0, ACCEPT),)),
        ),
        renew_enabled=False,
        min_minor=3,
    ),
)


#: A lock longer than moving a leader takes (two admin tools and an election, about 20 s
#: on a busy machine): a lock that ended at the old leader first would be persisted as a
#: release, and the new leader would hand the records out with a higher count. 60 s is
#: the longest a broker allows by default (``group.share.max.record.lock.duration.ms``);
#: run these scenarios one at a time.
MOVE_LOCK = 60000

#: Scenarios that move the partition's leader: they need a cluster (``cluster=True``).
CLUSTER_SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "leader-move-forgets-acquisitions",
        (
            Produce(3),
            Fetch("a"),
            Ack("a", ((0, 0, ACCEPT),)),
            MoveLeader(),
            Fetch("b"),
            Fetch("a", expect=False),
        ),
        lock_ms=MOVE_LOCK,
        cluster=True,
        doc="Acquired, not acknowledged: the new leader hands them out with the same count.",
    ),
    Scenario(
        "leader-move-keeps-persisted-counts",
        (
            Produce(2),
            Fetch("a"),
            Ack("a", ((0, 0, RELEASE), (1, 1, REJECT))),
            Fetch("a"),
            MoveLeader(),
            Fetch("a"),
        ),
        lock_ms=MOVE_LOCK,
        cluster=True,
        doc="A release and a reject are persisted: the count and the archive survive.",
    ),
    Scenario(
        "leader-move-then-acknowledge",
        (
            Produce(2),
            Fetch("a"),
            MoveLeader(),
            Fetch("a"),
            Fetch("a", acks=((0, 1, ACCEPT),), expect=False),
            Fetch("b", expect=False),
        ),
        lock_ms=MOVE_LOCK,
        cluster=True,
        doc="The member takes the records again at the new leader and accepts them there.",
    ),
    Scenario(
        "leaderless-then-back",
        (
            Produce(3),
            Fetch("a"),
            Ack("a", ((0, 0, ACCEPT), (1, 1, RELEASE))),
            StopLeader(),
            LookUp("a"),
            Fetch("a", expect=False),
            StartLeader(),
            LookUp("a"),
            Fetch("a"),
        ),
        lock_ms=MOVE_LOCK,
        cluster=True,
        doc="While its only broker is down the partition has no leader (LEADER_NOT_AVAILABLE "
        "in the metadata, no leader named) and another broker does not serve it; once the "
        "broker is back, what was accepted or released is kept and the acquisition is "
        "forgotten (what sharecon's leader search, sharecon/_share/leader_search.py, is "
        "tested against in the simulation).",
    ),
)


def scenarios_for(version: str) -> list[Scenario]:
    """The scenarios meant for Kafka ``version`` on one broker."""
    return [s for s in SCENARIOS if s.applies_to(version)]


def cluster_scenarios_for(version: str) -> list[Scenario]:
    """The scenarios meant for Kafka ``version`` that need a cluster (leader moves)."""
    return [s for s in CLUSTER_SCENARIOS if s.applies_to(version)]
