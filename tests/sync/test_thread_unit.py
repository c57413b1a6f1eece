"""The blocking clients' machinery without a broker: the loop thread's calls, deadlines and
errors, fork refusal, the SIGTERM guard, lifecycle errors."""

from __future__ import annotations

import os
import signal
import threading

import anyio
import anyio.lowlevel
import pytest

from sharecon import errors
from sharecon.sync import Admin, Producer, ShareConsumer
from sharecon.sync._thread import EngineThread, SigtermGuard


@pytest.fixture(params=["asyncio", "trio"])
def engine_thread(request: pytest.FixtureRequest) -> EngineThread:
    thread = EngineThread("Test", request.param)
    thread.start()
    yield thread
    thread.stop()


def test_a_call_runs_in_the_loop_thread_and_returns_its_result(engine_thread: EngineThread) -> None:
    async def where() -> int:
        await anyio.lowlevel.checkpoint()
        return threading.get_ident()

    ident = engine_thread.call(where)
    assert ident == engine_thread.ident != threading.get_ident()
    assert engine_thread.run_sync(threading.get_ident) == engine_thread.ident


def test_exceptions_reach_the_caller_with_their_own_type(engine_thread: EngineThread) -> None:
    class Custom(errors.KafkaError):
        pass

    async def fail() -> None:
        await anyio.lowlevel.checkpoint()
        raise Custom("from the loop")

    def fail_now() -> None:
        raise errors.InvalidRecordStateError("answered twice")

    with pytest.raises(Custom, match="from the loop"):
        engine_thread.call(fail)
    with pytest.raises(errors.InvalidRecordStateError, match="answered twice"):
        engine_thread.run_sync(fail_now)


def test_a_call_past_its_timeout_raises_and_is_cancelled(engine_thread: EngineThread) -> None:
    cancelled = threading.Event()

    async def slow() -> None:
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise

    with pytest.raises(errors.KafkaTimeoutError, match=r"sharecon.sync.Test.slow: no result"):
        engine_thread.call(slow, timeout=0.05)
    assert cancelled.wait(30)
    with pytest.raises(errors.ConfigError, match="timeout"):
        engine_thread.call(slow, timeout=-1)


def test_a_stopped_thread_refuses_calls() -> None:
    thread = EngineThread("Test", "asyncio")
    with pytest.raises(errors.ClientClosedError):
        thread.run_sync(threading.get_ident)
    with pytest.raises(errors.ConfigError, match="backend"):
        EngineThread("Test", "curio")  # type: ignore[arg-type]


# Python 3.12+ warns when a process with threads forks: exactly the case refused here.
@pytest.mark.filterwarnings("ignore:.*use of fork\\(\\) may lead to deadlocks:DeprecationWarning")
@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX only")
def test_a_client_used_after_fork_is_refused_in_the_child() -> None:
    consumer = ShareConsumer("localhost:1", group_id="g", topics=["t"])
    producer = Producer("localhost:1")
    pid = os.fork()
    if pid == 0:  # the child: report through the exit code only
        code = 0
        for call in (lambda: consumer.poll(timeout=0), lambda: producer.flush(), consumer.start):
            try:
                call()
                code = 10
            except errors.ForkedClientError as exc:
                if "fork()" not in str(exc) or not isinstance(exc, errors.ClientStateError):
                    code = 11
            except BaseException:
                code = 12
        consumer.close()  # a no-op in the child
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # The parent's clients are untouched: not started, not refused as forked.
    with pytest.raises(errors.ClientNotStartedError):
        consumer.poll(timeout=0)


def test_lifecycle_errors_name_the_client() -> None:
    consumer = ShareConsumer("localhost:1", group_id="g", topics=["t"])
    with pytest.raises(errors.ClientNotStartedError, match="sharecon.sync.ShareConsumer"):
        next(iter(consumer))
    consumer.close()
    consumer.close()  # twice: nothing
    with pytest.raises(errors.ClientClosedError):
        consumer.start()
    with pytest.raises(errors.ConfigError):
        ShareConsumer("localhost:1", group_id="g", topics=["t"], ack_mode="sometimes")  # type: ignore[arg-type]
    admin = Admin("localhost:1")
    with pytest.raises(errors.ClientNotStartedError, match="sharecon.sync.Admin"):
        admin.list_topics()


def test_a_failed_start_raises_its_error_and_leaves_no_thread() -> None:
    before = threading.active_count()
    consumer = ShareConsumer(
        "127.0.0.1:1", group_id="g", topics=["t"], connect_timeout=0.5, request_timeout=1.0
    )
    with pytest.raises(errors.KafkaConnectionError):
        consumer.start()
    assert threading.active_count() <= before  # its loop thread ended (others may have too)
    with pytest.raises(errors.ClientClosedError):
        consumer.start()


def test_the_sigterm_guard_installs_once_and_restores_the_default() -> None:
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        pytest.skip("SIGTERM has a handler in this test process already")
    assert SigtermGuard.acquire() and SigtermGuard.acquire()
    installed = signal.getsignal(signal.SIGTERM)
    assert installed is not signal.SIG_DFL
    SigtermGuard.release()
    assert signal.getsignal(signal.SIGTERM) is installed
    SigtermGuard.release()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL

    # An application's own handler is never replaced.
    def mine(signum: int, frame: object) -> None: ...

    signal.signal(signal.SIGTERM, mine)
    try:
        assert SigtermGuard.acquire()
        assert signal.getsignal(signal.SIGTERM) is mine
        SigtermGuard.release()
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_a_close_in_another_thread_between_reading_the_loop_and_calling_it(
    engine_thread: EngineThread,
) -> None:
    # run_sync read the loop's call_soon, then close() stopped the loop: the caller gets
    # ClientClosedError, not RuntimeError('Event loop is closed') / trio.RunFinishedError.
    real = engine_thread._soon
    assert real is not None

    def closed_first(func: object) -> object:
        engine_thread.stop()
        return real(func)  # type: ignore[arg-type]

    engine_thread._soon = closed_first
    with pytest.raises(errors.ClientClosedError, match="closed"):
        engine_thread.run_sync(threading.get_ident)


def test_a_call_the_stopped_loop_never_ran_ends_instead_of_waiting_forever(
    engine_thread: EngineThread,
) -> None:
    # The callback was handed to the loop, which stopped before running it.
    def dropped_by_the_stop(func: object) -> None:
        engine_thread.stop()

    engine_thread._soon = dropped_by_the_stop
    outcome: list[BaseException] = []

    def caller() -> None:
        try:
            engine_thread.run_sync(threading.get_ident)
        except BaseException as exc:
            outcome.append(exc)

    t = threading.Thread(target=caller, daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), "run_sync waited forever for a loop that had stopped"
    assert len(outcome) == 1 and isinstance(outcome[0], errors.ClientClosedError)
