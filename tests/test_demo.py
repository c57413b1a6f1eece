"""``scripts/demo`` end to end: its own broker, records in through sharecon, records out
through a share group, every record back, the broker stopped afterwards.

One run (it starts and stops a broker of its own). With ``SHARECON_BOOTSTRAP`` set, the
demo runs against that cluster instead (``--bootstrap``), as the fixtures do.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

import pytest

pytestmark = pytest.mark.broker

RECORDS = 2000


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((host, port)) == 0


def test_demo_consumes_every_record_through_a_share_group() -> None:
    cmd = [sys.executable, "-m", "sharecon.testing.demo", "--records", str(RECORDS)]
    # Every 100th record delivered is released on its first delivery: the summary
    # must show them delivered twice.
    cmd += ["--release-every", "100"]
    external = os.environ.get("SHARECON_BOOTSTRAP")
    if external:
        cmd += ["--bootstrap", external]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    out = proc.stdout
    assert proc.returncode == 0, f"demo failed ({proc.returncode}):\n{out}\n{proc.stderr}"

    assert "share groups ENABLED" in out
    consumed = re.search(
        r"consumed\s+(\d+) of (\d+) records in [\d.]+ s \(([\d,]+) records/s\)", out
    )
    assert consumed, out
    assert consumed.group(1) == consumed.group(2) == str(RECORDS)
    assert int(consumed.group(3).replace(",", "")) > 0

    released = int(re.search(r"released\s+(\d+) on purpose, all delivered again", out).group(1))  # type: ignore[union-attr]
    assert released > 0
    deliveries = re.search(r"deliveries\s+(\d+): (.*)", out)
    assert deliveries, out
    by_count = {
        int(dc): int(n)
        for n, dc in re.findall(r"(\d+) x delivery_count=(\d+)", deliveries.group(2))
    }
    # Every record once with count 1 (the released ones included), the released ones again.
    assert by_count == {1: RECORDS, 2: released}
    assert int(deliveries.group(1)) == RECORDS + released
    acked = re.search(r"answers\s+(\d+) offsets acknowledged by the broker, (\d+) failed", out)
    assert acked, out
    assert (int(acked.group(1)), int(acked.group(2))) == (RECORDS + released, 0)

    if not external:
        up = re.search(r"up at (127\.0\.0\.1):(\d+)", out)
        assert up, out
        assert "stopping the broker" in out
        assert not _port_open(up.group(1), int(up.group(2))), "the demo left its broker running"
