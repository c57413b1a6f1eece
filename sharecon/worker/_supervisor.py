"""The supervisor: starts the worker processes, restarts them, drains them, reports progress.

Rules of this module:

1. Each worker process is ``python -m sharecon.worker._child`` in a session of its own
   (so a Ctrl-C at the terminal reaches only the supervisor), fed its config on stdin and
   reporting on a pipe of its own; its stdout and stderr are the supervisor's (see
   :mod:`sharecon.worker._child`).
2. A process that exits when not asked to is restarted after an exponential backoff; one
   that exits with 2 (configuration) or 3 (missing topic) stops the whole worker, since
   starting it again cannot help. Its records come back to the group when the broker sees
   its connections close, or when their locks end.
3. With ``handler_timeout``, a process whose oldest record in flight passed it, or that
   stopped reporting for as long (a handler blocking its event loop), is killed, and then
   restarted like any process that died.
4. The first SIGINT or SIGTERM drains: every process is told to stop taking records,
   finish or release what it holds within ``grace`` seconds, close its consumer and exit.
   A second signal kills them all at once. Every wait has a deadline.
5. Status lines (starts, restarts, progress) go to ``stream`` (stderr), plain text, one
   line each; diagnostics go to the ``sharecon.worker`` logger.
6. With ``autoscale``, a sampler feeds the sans-I/O rule of
   :mod:`sharecon.worker._autoscale` every ``SAMPLE_EVERY`` seconds with the processes'
   busyness (from their reports) and the group's backlog (share-group lag, read with
   DescribeShareGroupOffsets every ``BACKLOG_EVERY`` seconds), and carries out its
   decisions: a new process in a free slot, or a drain of the newest one (which is then
   not restarted). Every change is a status line with its reason.
7. With ``health_port``, ``GET /healthz`` and ``GET /readyz`` answer 200 or 503 with a
   reason, as :mod:`sharecon.worker._health` decides from the processes' reports (each
   carries its consumer's ``health()``), for a liveness and a readiness probe.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from sharecon import errors
from sharecon._backoff import Backoff
from sharecon._net.http_serve import Response, serve_http
from sharecon.admin import Admin
from sharecon.worker import _health
from sharecon.worker._autoscale import Autoscaler, Decision, Sample
from sharecon.worker._config import autoscale_policy, load_handler
from sharecon.worker._protocol import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, REPORT_EVERY

if TYPE_CHECKING:
    from collections.abc import Sequence

    from anyio.abc import Process

    from sharecon.worker._config import WorkerConfig

__all__ = ["COUNTERS", "EXIT_DRAINED", "EXIT_ERROR", "Supervisor", "format_progress", "serve"]

logger = logging.getLogger("sharecon.worker")

EXIT_DRAINED = 0
EXIT_ERROR = 1
EXIT_FORCED_SIGINT = 130
EXIT_FORCED_SIGTERM = 143

#: Counters each process reports, summed over its restarts.
COUNTERS = (
    "handled",
    "failed",
    "dlq",
    "redelivered",
    "finished_in_drain",
    "expired",
    "released",
    "lost",
)

#: Restart delays: 0.5 s, 1 s, 2 s ... 30 s; back to 0.5 s after a process ran RESET_AFTER s.
RESTART_BACKOFF = Backoff(initial=0.5, maximum=30.0, jitter=0.2)
RESET_AFTER = 60.0
#: Time a new process has to report for the first time (interpreter start, imports).
STARTUP_SILENCE = 30.0
#: Beyond ``grace``: time for a draining process to close its consumer and exit.
CLOSE_ALLOWANCE = 15.0
#: Lines of a child's report we accept (far more than a report takes).
_MAX_LINE = 1 << 16
#: Seconds between samples of the autoscaling rule.
SAMPLE_EVERY = 0.5
#: Seconds between reads of the group's backlog (one DescribeShareGroupOffsets each).
BACKLOG_EVERY = 1.0
#: Seconds a process's last report counts for readiness (it reports every REPORT_EVERY).
READY_FRESH = 10 * REPORT_EVERY
#: Seconds of silence after which a running process makes the worker not live.
LIVE_SILENCE = STARTUP_SILENCE


@dataclass
class _Slot:
    """One worker process position: its current process and what its processes did."""

    index: int
    proc: Process | None = None
    pid: int | None = None
    started: float = 0.0
    last_report: float = 0.0
    reported: bool = False
    #: Its consumer joined the group (as last reported).
    ready: bool = False
    oldest: float | None = None
    in_flight: int = 0
    current: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    base: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    restarts: int = 0
    killed_hung: int = 0
    done: bool = False
    #: Share of handler slots in use over the last report period (0..1).
    busy: float = 0.0
    #: Set to drain this slot's process (all slots on stop; one on a scale-down).
    drain: anyio.Event = field(default_factory=anyio.Event)
    #: Drained by the autoscaler: not restarted, free for a later scale-up.
    retired: bool = False
    #: Its consumer's ``health()`` as last reported: ok, and why not.
    health_ok: bool = False
    health_reason: str = "not reported yet"

    def view(self) -> _health.ChildView:
        """What the health decision sees of this slot."""
        running = self.proc is not None and self.proc.returncode is None
        return _health.ChildView(
            self.index,
            running,
            self.started,
            self.last_report,
            self.reported,
            self.health_ok,
            self.health_reason,
        )

    def total(self, name: str) -> int:
        return self.base[name] + self.current[name]


def format_progress(
    rates: list[float],
    *,
    in_flight: int,
    handled: int,
    failed: int,
    dlq: int,
    redelivered: int,
    restarts: int,
    processes: int | None = None,
    expired: int = 0,
    released: int = 0,
    lost: int = 0,
) -> str:
    """One progress line (plain text, greppable); ``processes`` (under autoscaling) adds
    the count running. ``expired``: records whose locks ended in a process's buffer;
    ``released``: records a process released without handing them out (its consumer
    closed, or left its group for idleness, with them buffered); ``lost``: records a
    process dropped from its buffer because their share session ended or their
    partition's leader changed (their locks were gone). Each is a delivery attempt spent
    unseen."""
    per = " ".join(f"p{i} {r:,.1f}" for i, r in enumerate(rates))
    line = (
        f"sharecon worker: {sum(rates):,.1f} rec/s ({per}) | handled {handled:,} | "
        f"in flight {in_flight} | failed {failed:,} | dlq {dlq:,} | "
        f"redelivered {redelivered:,} | expired unseen {expired:,} | "
        f"released unseen {released:,} | lost unseen {lost:,} | restarts {restarts}"
    )
    return line if processes is None else f"{line} | processes {processes}"


class Supervisor:
    """Runs ``config.processes`` worker processes until drained; see the module rules."""

    def __init__(
        self,
        config: WorkerConfig,
        stream: TextIO | None = None,
        *,
        command: Sequence[str] = (),
    ) -> None:
        """:param command: the worker process's command line before ``--report-fd N``
        (default ``python -m sharecon.worker._child``; tests give a stand-in)."""
        self.config = config
        self._stream = stream
        self._console: Any = None  # a rich Console, made on the first line to a terminal
        self._command = list(command) or [sys.executable, "-m", "sharecon.worker._child"]
        policy = autoscale_policy(config)
        self._scaler = None if policy is None else Autoscaler(policy)
        count = config.processes
        if policy is not None:
            count = max(policy.minimum, min(policy.maximum, count))
        self.slots = [_Slot(i) for i in range(count)]
        #: Every change made (``anyio.current_time()``, decision), in order (also said on
        #: the stream).
        self.scale_changes: list[tuple[float, Decision]] = []
        #: The group's backlog as last read (``None``: unknown).
        self.backlog: int | None = None
        self._slot_tg: Any = None
        self._stopping = anyio.Event()
        self._exit_code = EXIT_DRAINED
        self._forced = False
        self._last_tick = 0.0  # set when the health endpoints start
        #: ``(host, port)`` the health endpoints listen on, once they do.
        self.health_address: tuple[str, int] | None = None

    # -- output ------------------------------------------------------------------------------

    def say(self, text: str) -> None:
        """One status line on the stream (nothing when there is none): styled with rich
        on a terminal, plain text otherwise (logs, pipes, files stay greppable)."""
        stream = self._stream
        if stream is None:
            return
        isatty = getattr(stream, "isatty", None)
        if isatty is not None and isatty():
            if self._console is None:
                # Imported here: rich costs import time that a worker without a terminal
                # need not pay.
                from rich.console import Console

                self._console = Console(file=stream, highlight=True, soft_wrap=True)
            from rich.text import Text

            self._console.print(Text.assemble(("sharecon worker: ", "bold cyan"), text))
            return
        stream.write(f"sharecon worker: {text}\n")
        stream.flush()

    # -- lifecycle -----------------------------------------------------------------------

    async def run(self) -> int:
        """Start, supervise and drain; returns the exit code."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch_signals)
            if self.config.health_port is not None:
                self._last_tick = anyio.current_time()
                tg.start_soon(self._tick)
                tg.start_soon(self._serve_health, self.config.health_host, self.config.health_port)
            if self.config.interval is not None:
                tg.start_soon(self._progress, self.config.interval)
            async with anyio.create_task_group() as slots:
                self._slot_tg = slots
                for slot in self.slots:
                    slots.start_soon(self._supervise, slot)
                if self._scaler is not None:
                    # In the slots' group: it may start slots; it ends on stop.
                    slots.start_soon(self._autoscale, self._scaler)
            tg.cancel_scope.cancel()
        handled = sum(s.total("handled") for s in self.slots)
        failed = sum(s.total("failed") for s in self.slots)
        dlq = sum(s.total("dlq") for s in self.slots)
        finished = sum(s.total("finished_in_drain") for s in self.slots)
        how = (
            "killed"
            if self._forced
            else "stopped with errors"
            if self._exit_code != EXIT_DRAINED
            else "drained"
        )
        expired = sum(s.total("expired") for s in self.slots)
        released = sum(s.total("released") for s in self.slots)
        tail = f", finished while draining {finished:,}" if finished else ""
        # Fetched, never started, released at close once the grace period ran out.
        tail += f", released unseen {released:,}" if released else ""
        # Buffered when their session ended or their partition's leader changed.
        lost = sum(s.total("lost") for s in self.slots)
        tail += f", lost unseen {lost:,}" if lost else ""
        self.say(
            f"{how}: handled {handled:,}, failed {failed:,}, dlq {dlq:,}, "
            f"expired unseen {expired:,}{tail}"
        )
        return self._exit_code

    def stop(self, code: int = EXIT_DRAINED) -> None:
        """Start draining (idempotent; the first non-zero code is kept)."""
        if self._exit_code == EXIT_DRAINED:
            self._exit_code = code
        if self._stopping.is_set():
            return
        # Each slot's _drain_when_stopping tells its process.
        self._stopping.set()
        for slot in self.slots:
            slot.drain.set()

    def kill_all(self, code: int) -> None:
        """Kill every process now (second signal)."""
        self._forced = True
        self._exit_code = code
        self._stopping.set()
        for slot in self.slots:
            slot.drain.set()
        for slot in self.slots:
            if slot.proc is not None and slot.proc.returncode is None:
                slot.proc.kill()

    async def _watch_signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                name = "SIGINT" if signum == signal.SIGINT else "SIGTERM"
                if self._stopping.is_set():
                    self.say(f"{name} again: killing the worker processes")
                    self.kill_all(
                        EXIT_FORCED_SIGINT if signum == signal.SIGINT else EXIT_FORCED_SIGTERM
                    )
                else:
                    self.say(
                        f"{name}: draining (up to {self.config.grace:g} s for records in "
                        "flight; again to kill)"
                    )
                    self.stop()

    # -- health ----------------------------------------------------------------------------

    def liveness(self, now: float) -> _health.Verdict:
        """``GET /healthz``: see :func:`sharecon.worker._health.liveness`."""
        return _health.liveness(
            self._serving(),
            now,
            last_tick=self._last_tick,
            silent_after=LIVE_SILENCE,
            startup_after=STARTUP_SILENCE,
        )

    def readiness(self, now: float) -> _health.Verdict:
        """``GET /readyz``: see :func:`sharecon.worker._health.readiness`."""
        return _health.readiness(
            self._serving(),
            now,
            draining=self._stopping.is_set(),
            silent_after=READY_FRESH,
        )

    def _serving(self) -> list[_health.ChildView]:
        # A slot autoscaling drained and retired is gone on purpose: not one of the M in
        # "N of M" (a retired slot still draining counts until its process has left).
        return [s.view() for s in self.slots if not (s.retired and s.done)]

    async def _tick(self) -> None:
        # The sign of life /healthz checks: this task runs only while the loop does.
        while True:
            self._last_tick = anyio.current_time()
            await anyio.sleep(REPORT_EVERY)

    async def _health_route(self, path: str) -> Response | None:
        if path == "/healthz":
            verdict = self.liveness(anyio.current_time())
        elif path == "/readyz":
            verdict = self.readiness(anyio.current_time())
        else:
            return None
        return Response(200 if verdict.ok else 503, verdict.reason + "\n")

    async def _serve_health(self, host: str, port: int) -> None:
        def listening(bound_host: str, bound_port: int) -> None:
            self.health_address = (bound_host, bound_port)
            logger.info("health endpoints on %s:%d", bound_host, bound_port)
            self.say(f"health on http://{bound_host}:{bound_port}/healthz and /readyz")

        try:
            await serve_http(
                host,
                port,
                self._health_route,
                not_found="not found: try /healthz or /readyz\n",
                on_listening=listening,
            )
        except OSError as exc:
            self.say(f"cannot serve health on {host}:{port}: {exc.strerror or exc}: stopping")
            self.stop(EXIT_ERROR)

    # -- one slot --------------------------------------------------------------------------

    async def _supervise(self, slot: _Slot) -> None:
        attempt = 0
        while not slot.drain.is_set():
            started = anyio.current_time()
            code = await self._run_process(slot)
            if slot.retired and not self._stopping.is_set():
                if code != EXIT_OK:
                    self.say(f"process {slot.index} (pid {slot.pid}) {_how(code)} while draining")
                break
            if slot.drain.is_set():
                # A process that did not drain cleanly makes the whole drain an error.
                if code != EXIT_OK and not self._forced and self._exit_code == EXIT_DRAINED:
                    self._exit_code = EXIT_ERROR
                break
            if code in (EXIT_USAGE, EXIT_NOT_FOUND):
                self.say(f"process {slot.index} {_how(code)}: stopping")
                self.stop(code)
                break
            if anyio.current_time() - started >= RESET_AFTER:
                attempt = 0
            delay = RESTART_BACKOFF.delay(attempt)
            attempt += 1
            slot.restarts += 1
            self.say(
                f"process {slot.index} (pid {slot.pid}) {_how(code)}; restarting in {delay:.1f} s"
            )
            with anyio.move_on_after(delay):
                await slot.drain.wait()
        slot.done = True

    async def _run_process(self, slot: _Slot) -> int:
        """Start one process in ``slot``, watch it until it exits; returns its exit code."""
        report_r, report_w = os.pipe()
        try:
            proc = await anyio.open_process(
                [*self._command, "--report-fd", str(report_w)],
                stdin=subprocess.PIPE,
                stdout=None,
                stderr=None,
                start_new_session=True,
                pass_fds=(report_w,),
                env=_child_env(),
            )
        except BaseException:
            os.close(report_r)
            raise
        finally:
            os.close(report_w)  # the child's copy is the only writer: its exit ends the pipe
        slot.proc, slot.pid = proc, proc.pid
        slot.started = slot.last_report = anyio.current_time()
        slot.reported, slot.ready, slot.oldest, slot.in_flight = False, False, None, 0
        slot.health_ok, slot.health_reason = False, "not reported yet"
        self.say(f"process {slot.index} started (pid {proc.pid})")
        assert proc.stdin is not None
        hello = {"index": slot.index, "config": self.config.to_dict()}
        lines = [json.dumps(hello).encode() + b"\n"]
        if slot.drain.is_set():
            lines.append(b"drain\n")
        try:
            for line in lines:
                await proc.stdin.send(line)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # it died already: wait() below says how
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._read_reports, slot, report_r)
                tg.start_soon(self._drain_when_stopping, slot)
                if self.config.handler_timeout is not None:
                    tg.start_soon(self._watchdog, slot, self.config.handler_timeout)
                await proc.wait()
                tg.cancel_scope.cancel()
        finally:
            os.close(report_r)
            with anyio.CancelScope(shield=True):
                if proc.returncode is None:
                    proc.kill()
                await proc.aclose()
        for name in COUNTERS:
            slot.base[name] += slot.current[name]
            slot.current[name] = 0
        slot.in_flight, slot.oldest, slot.ready = 0, None, False
        slot.health_ok, slot.health_reason = False, f"exited with code {proc.returncode}"
        code = proc.returncode
        assert code is not None
        return code

    async def _drain_when_stopping(self, slot: _Slot) -> None:
        await slot.drain.wait()
        proc = slot.proc
        if proc is None or proc.stdin is None or self._forced:
            return
        try:
            with anyio.fail_after(5):
                await proc.stdin.send(b"drain\n")
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError, TimeoutError):
            return  # it is gone (or stuck: the deadline below kills it)
        limit = self.config.grace + CLOSE_ALLOWANCE
        with anyio.move_on_after(limit):
            await proc.wait()
        if proc.returncode is None:
            self.say(
                f"process {slot.index} (pid {proc.pid}) did not drain within {limit:g} s: "
                "killing it"
            )
            proc.kill()

    async def _read_reports(self, slot: _Slot, fd: int) -> None:
        os.set_blocking(fd, False)
        pending = b""
        while True:
            await anyio.wait_readable(fd)
            try:
                data = os.read(fd, _MAX_LINE)
            except BlockingIOError:
                continue
            if not data:
                return  # the process closed its end: it is exiting
            pending += data
            *lines, pending = pending.split(b"\n")
            if len(pending) > _MAX_LINE:
                logger.warning("process %d: report line too long; ignoring it", slot.index)
                pending = b""
            for line in lines:
                self._take_report(slot, line)

    def _take_report(self, slot: _Slot, line: bytes) -> None:
        try:
            report: dict[str, Any] = json.loads(line)
        except ValueError:
            logger.warning("process %d: unreadable report %r", slot.index, line[:200])
            return
        slot.last_report = anyio.current_time()
        slot.reported = True
        slot.ready = report.get("ready") is True
        slot.health_ok = report.get("health_ok") is True
        reason = report.get("health_reason")
        slot.health_reason = reason[:200] if isinstance(reason, str) else "no reason given"
        for name in COUNTERS:
            value = report.get(name)
            if isinstance(value, int):
                slot.current[name] = value
        busy = report.get("busy")
        slot.busy = float(busy) if isinstance(busy, int | float) else 0.0
        in_flight = report.get("in_flight")
        slot.in_flight = in_flight if isinstance(in_flight, int) else 0
        oldest = report.get("oldest")
        slot.oldest = float(oldest) if isinstance(oldest, int | float) else None

    async def _watchdog(self, slot: _Slot, limit: float) -> None:
        """Kill the process when a record stays in its handler longer than ``limit``, or when
        it stops reporting for as long (its event loop is blocked)."""
        while True:
            await anyio.sleep(min(REPORT_EVERY, limit / 4))
            now = anyio.current_time()
            since = now - slot.last_report
            age = None if slot.oldest is None else slot.oldest + since
            silent_limit = max(limit, 4 * REPORT_EVERY) if slot.reported else STARTUP_SILENCE
            if age is not None and age > limit:
                why = f"a record has been in its handler for {age:.1f} s"
            elif since > silent_limit:
                why = f"it has not reported for {since:.1f} s"
            else:
                continue
            slot.killed_hung += 1
            self.say(
                f"process {slot.index} (pid {slot.pid}): {why} (handler timeout "
                f"{limit:g} s): killing it"
            )
            if slot.proc is not None:
                slot.proc.kill()
            return

    # -- progress --------------------------------------------------------------------------

    async def _progress(self, interval: float) -> None:
        last = [s.total("handled") + s.total("failed") for s in self.slots]
        last_time = time.monotonic()
        while True:
            await anyio.sleep(interval)
            now = time.monotonic()
            elapsed = max(now - last_time, 1e-9)
            done = [s.total("handled") + s.total("failed") for s in self.slots]
            # Slots the autoscaler added since the last line start from zero.
            last += [0] * (len(done) - len(last))
            rates = [(d - p) / elapsed for d, p in zip(done, last, strict=True)]
            last, last_time = done, now
            self.say(
                format_progress(
                    rates,
                    in_flight=sum(s.in_flight for s in self.slots),
                    handled=sum(s.total("handled") for s in self.slots),
                    failed=sum(s.total("failed") for s in self.slots),
                    dlq=sum(s.total("dlq") for s in self.slots),
                    redelivered=sum(s.total("redelivered") for s in self.slots),
                    restarts=sum(s.restarts for s in self.slots),
                    processes=None if self._scaler is None else len(self._active()),
                    expired=sum(s.total("expired") for s in self.slots),
                    released=sum(s.total("released") for s in self.slots),
                    lost=sum(s.total("lost") for s in self.slots),
                )[len("sharecon worker: ") :]
            )

    # -- autoscaling -------------------------------------------------------------------------

    def _active(self) -> list[_Slot]:
        """Slots running (or restarting) a process that is not draining."""
        return [s for s in self.slots if not s.done and not s.drain.is_set()]

    def sample(self, now: float) -> Sample | None:
        """What the autoscaler sees now; ``None`` until a process reported ready."""
        active = self._active()
        ready = [s for s in active if s.ready]
        if not ready:
            return None
        busy = sum(s.busy for s in ready) / len(ready)
        return Sample(now, len(active), busy, self.backlog)

    def apply(self, decision: Decision) -> None:
        """Carry out one decision of the autoscaler (and say so)."""
        self.scale_changes.append((anyio.current_time(), decision))
        self.say(
            f"autoscale: {decision.current} -> {decision.target} processes ({decision.reason})"
        )
        logger.info("autoscale %d -> %d: %s", decision.current, decision.target, decision.reason)
        for _ in range(decision.target, decision.current):
            active = self._active()
            if not active:
                break
            slot = max(active, key=lambda s: s.index)
            slot.retired = True
            slot.drain.set()  # its _drain_when_stopping tells the process
        for _ in range(decision.current, decision.target):
            free = [s for s in self.slots if s.done and s.retired]
            if free:
                slot = min(free, key=lambda s: s.index)
                slot.done, slot.retired, slot.drain = False, False, anyio.Event()
                slot.ready, slot.busy = False, 0.0
            else:
                slot = _Slot(len(self.slots))
                self.slots.append(slot)
            self._slot_tg.start_soon(self._supervise, slot)

    async def _autoscale(self, scaler: Autoscaler) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._read_backlog)
            with anyio.CancelScope() as scope:
                tg.start_soon(self._cancel_on_stop, scope)
                while True:
                    await anyio.sleep(SAMPLE_EVERY)
                    sample = self.sample(anyio.current_time())
                    if sample is None:
                        continue
                    decision = scaler.observe(sample)
                    if decision is not None:
                        self.apply(decision)
            tg.cancel_scope.cancel()

    async def _cancel_on_stop(self, scope: anyio.CancelScope) -> None:
        await self._stopping.wait()
        scope.cancel()

    async def _read_backlog(self) -> None:
        """Keep :attr:`backlog` up to date: the group's lag summed over its partitions."""
        config = self.config
        failing = False
        while True:
            try:
                async with Admin(config.bootstrap_servers(), **config.client_kwargs()) as admin:
                    while True:
                        with anyio.fail_after(config.timeout):
                            offsets = await admin.describe_share_group_offsets(
                                config.group, list(config.topics), timeout=config.timeout
                            )
                        lags = [o.lag for o in offsets.values() if o.lag >= 0]
                        self.backlog = sum(lags) if lags else None
                        if failing:
                            logger.info("autoscale: reading the backlog works again")
                            failing = False
                        await anyio.sleep(BACKLOG_EVERY)
            except (errors.KafkaError, TimeoutError) as exc:
                self.backlog = None
                if not failing:
                    # Busyness alone decides meanwhile (rule 1 of the autoscaler).
                    logger.warning("autoscale: cannot read the group's backlog: %s", exc)
                    failing = True
                await anyio.sleep(BACKLOG_EVERY)


async def check_setup(config: WorkerConfig) -> None:
    """Fail early and clearly: the handler imports, and the topics exist.

    :raises ConfigError: the handler cannot be loaded.
    :raises UnknownTopicOrPartitionError: a topic does not exist (naming it).
    """
    load_handler(config.handler)
    async with Admin(config.bootstrap_servers(), **config.client_kwargs()) as admin:
        await admin.describe_topics(list(config.topics))


async def serve(config: WorkerConfig, *, stream: TextIO | None = None) -> int:
    """Check the setup, then supervise the worker processes until drained (async form of
    :func:`sharecon.worker.run`); returns the exit code."""
    await check_setup(config)
    return await Supervisor(config, stream).run()


def _how(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _child_env() -> dict[str, str]:
    """The environment, with this sharecon first on the path: a worker process runs the
    same sharecon as its supervisor, even one found through the supervisor's own
    ``sys.path`` (a checkout, a script's folder) rather than the installed one."""
    # This file is <root>/sharecon/worker/_supervisor.py.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.environ.get("PYTHONPATH")
    # A worker process gets its settings, secrets included, on stdin: it needs none of
    # the SHARECON_* secrets in its environment, where the handler's code, its own child
    # processes and anyone able to read /proc/PID/environ would see them.
    env = {k: v for k, v in os.environ.items() if not _is_secret_variable(k)}
    env["PYTHONPATH"] = root + (os.pathsep + path if path else "")
    return env


# SHARECON_SASL_PASSWORD, and any other SHARECON_* variable named like a secret (a key
# password, an OAuth client secret or token, a JAAS config with a password inside).
_SECRET_VARIABLE = re.compile(r"SHARECON_\w*(PASSWORD|SECRET|TOKEN|CREDENTIAL|PASSPHRASE|JAAS)")


def _is_secret_variable(name: str) -> bool:
    return _SECRET_VARIABLE.match(name.upper()) is not None
