"""Ctrl-C (SIGINT) and SIGTERM stop a blocking consumer cleanly: its ``with`` block closes
it, the record it held is released at once (the release is acknowledged before the process
exits) and reaches another member with delivery count 2, long before its lock would end."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from typing import TYPE_CHECKING

import pytest

from sharecon.sync import ShareConsumer
from tests.sync.conftest import produce, take

if TYPE_CHECKING:
    from pathlib import Path

    from sharecon.testing.pytest_plugin import ShareGroupFactory, TopicFactory

pytestmark = [pytest.mark.broker]

CHILD = textwrap.dedent(
    """
    import faulthandler, signal, sys, time
    from sharecon.sync import ShareConsumer

    # Every thread's stack on SIGUSR1: what a child that does not end was doing.
    faulthandler.register(signal.SIGUSR1, all_threads=True)

    bootstrap, group, topic = sys.argv[1:4]

    def on_acknowledged(results):
        for r in results:
            for b in r.batches:
                print("ACK", r.ok, b.first_offset, b.last_offset,
                      "+".join(t.name for t in b.types), flush=True)

    with ShareConsumer(bootstrap, group_id=group, topics=[topic],
                       on_acknowledged=on_acknowledged) as consumer:
        for record in consumer:
            print("HOLDING", record.offset, record.delivery_count, flush=True)
            # The handler is busy when the signal comes. In short sleeps: CPython checks
            # for a signal when a sleep is interrupted, not before one starts, so a signal
            # that lands just before a sleep waits for its end (seen once in CI: a single
            # 600 s sleep outlasted the test's wait). docs/sync.md says so.
            for _ in range(6000):
                time.sleep(0.1)
    """
)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_closes_the_consumer_and_releases_the_record_it_held(
    signum: signal.Signals,
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    share_group_factory: ShareGroupFactory,
    tmp_path: Path,
) -> None:
    # The lock (60 s, the broker's most) outlasts the wait below: only a release brings
    # the record back in time.
    group = share_group_factory({"share.record.lock.duration.ms": "60000"})
    topic = topic_factory(1)
    produce(kafka_bootstrap, topic, [b"job"])
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script), kafka_bootstrap, group, topic],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()  # blocks until the child holds the record
        assert line.split() == ["HOLDING", "0", "1"], (
            line,
            child.stderr.read() if child.stderr else "",
        )
        sent = time.monotonic()
        child.send_signal(signum)
        try:
            out, err = child.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            # Ask for every thread's stack before the kill, so a failure says where the
            # child waited.
            child.send_signal(signal.SIGUSR1)
            time.sleep(1.0)
            child.kill()
            out, err = child.communicate()
            pytest.fail(f"the child did not end after {signum.name}:\n{out}\n{err}")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    if signum == signal.SIGTERM:
        assert child.returncode == 143, err
    else:
        assert child.returncode in (-signal.SIGINT, 130) and "KeyboardInterrupt" in err, err
    # The close released the record in hand, and the broker said so before the exit.
    assert "ACK True 0 0 RELEASE" in out, (out, err)
    # Another member gets it with delivery 2 while its lock would still run.
    with ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic]) as other:
        got = take(other, 1, deadline=max(1.0, 45 - (time.monotonic() - sent)))
        other.commit()
    assert [(r.value, r.delivery_count) for r in got] == [(b"job", 2)]
