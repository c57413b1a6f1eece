"""A stand-in worker process that speaks the supervisor's protocol without Kafka.

``python tests/worker/fake_child.py --report-fd N``; what it does comes from
``FAKE_CHILD_MODE``, with marker files in ``FAKE_CHILD_DIR``:

* ``normal``: reports a growing ``handled`` every 0.05 s; on ``drain`` (or end of stdin)
  notes ``drained-INDEX-PID`` and exits 0;
* ``crash_first``: exits 1 at once the first time each index starts, then ``normal``;
* ``hang_first``: the first time each index starts, reports one record in flight since it
  started, for ever (then ``normal``);
* ``usage``: exits 2 at once (as a worker process with a bad configuration does);
* ``stubborn``: reports, but never drains;
* ``unhealthy``: ``normal``, with its consumer's health reported not ok;
* ``silent``: reports once, then nothing until drained (a blocked event loop).

Reports carry ``health_ok`` (true but in ``unhealthy``) and ``health_reason``.

Every mode reports as ``busy`` the number in the file ``FAKE_CHILD_DIR/busy`` (0 without
one), so a test sets how busy the handlers look to the autoscaler.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path


def main() -> None:
    fd = int(sys.argv[sys.argv.index("--report-fd") + 1])
    hello = json.loads(sys.stdin.readline())
    index = hello["index"]
    mode = os.environ["FAKE_CHILD_MODE"]
    folder = Path(os.environ["FAKE_CHILD_DIR"])
    first = not (folder / f"started-{index}").exists()
    (folder / f"started-{index}").touch()
    if mode == "usage":
        sys.exit(2)
    if mode == "crash_first" and first:
        sys.exit(1)
    hang = mode == "hang_first" and first
    drain = threading.Event()

    def control() -> None:
        for line in sys.stdin:
            if line.strip() == "drain" and mode != "stubborn":
                drain.set()
        if mode != "stubborn":
            drain.set()

    threading.Thread(target=control, daemon=True).start()
    start = time.monotonic()
    handled = 0
    while not drain.is_set():
        handled += 1
        oldest = time.monotonic() - start if hang else None
        busy_file = folder / "busy"
        try:
            busy = float(busy_file.read_text())
        except (OSError, ValueError):
            busy = 0.0
        report = {
            "busy": busy,
            "handled": handled,
            "failed": 0,
            "dlq": 0,
            "redelivered": 0,
            "in_flight": 1 if hang else 0,
            "oldest": oldest,
            "ready": True,
            "health_ok": mode != "unhealthy",
            "health_reason": "group membership joining" if mode == "unhealthy" else "ok",
        }
        os.write(fd, json.dumps(report).encode() + b"\n")
        if mode == "silent":
            drain.wait()
        drain.wait(0.05)
    (folder / f"drained-{index}-{os.getpid()}").touch()
    sys.exit(0)


if __name__ == "__main__":
    main()
