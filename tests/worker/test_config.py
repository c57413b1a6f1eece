"""The worker's settings, handler loading, per-record bookkeeping and command line, without
a broker."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from sharecon import errors
from sharecon.worker import WorkerConfig, handler_spec, load_handler, load_toml
from sharecon.worker._child import Stats, health_of, wrap_handler
from sharecon.worker._config import autoscale_policy, config_from_sources
from sharecon.worker._supervisor import format_progress
from tests.worker import handlers

if TYPE_CHECKING:
    from pathlib import Path

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def _config(**kw: Any) -> WorkerConfig:
    base: dict[str, Any] = {
        "handler": "tests.worker.handlers:record_id",
        "group": "g",
        "topics": ["t"],
    }
    return WorkerConfig(**{**base, **kw})


# -- WorkerConfig ---------------------------------------------------------------------------


def test_config_round_trips_through_json_form() -> None:
    config = _config(processes=3, sasl_mechanism="PLAIN", sasl_username="u", sasl_password="pw")
    assert WorkerConfig.from_dict(config.to_dict()) == config
    assert config.topics == ("t",)
    assert "pw" not in repr(config)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"processes": 0}, "processes must be an integer of at least 1"),
        ({"concurrency": -1}, "concurrency"),
        ({"dlq_after": 0}, "dlq_after"),
        ({"handler_timeout": 0.0}, "handler_timeout must be positive"),
        ({"grace": -1.0}, "grace must not be negative"),
        ({"group": ""}, "a group is needed"),
        ({"topics": []}, "at least one topic"),
        ({"handler": "no_colon"}, "handler must be"),
        ({"dlq_topic": "dead"}, "dlq_topic needs dlq_after"),
        ({"sasl_mechanism": "PLAIN"}, "SASL needs"),
        ({"sasl_mechanism": "MD5", "sasl_username": "u", "sasl_password": "p"}, "MD5"),
        ({"health_port": -1}, "health_port must be an integer of at least 0"),
        ({"health_port": 70000}, "health_port must be at most 65535"),
        ({"health_host": ""}, "health_host must not be empty"),
    ],
)
def test_config_refuses_bad_settings(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(errors.ConfigError, match=message):
        _config(**kw)


def test_from_dict_refuses_unknown_settings() -> None:
    with pytest.raises(errors.ConfigError, match="unknown worker settings: colour"):
        WorkerConfig.from_dict({**_config().to_dict(), "colour": "blue"})


# -- sources ---------------------------------------------------------------------------------


def test_flags_win_over_environment_which_wins_over_toml() -> None:
    env = {"SHARECON_GROUP": "from-env", "SHARECON_PROCESSES": "3", "SHARECON_TOPICS": "a, b"}
    toml = {"group": "from-toml", "processes": 5, "concurrency": 7, "handler": "m:f"}
    config = config_from_sources({"group": "from-flag"}, env, toml)
    assert config.group == "from-flag"
    assert config.processes == 3
    assert config.concurrency == 7
    assert config.topics == ("a", "b")
    assert config.handler == "m:f"


def test_environment_values_are_checked_naming_the_variable() -> None:
    env = {"SHARECON_PROCESSES": "many"}
    with pytest.raises(errors.ConfigError, match="SHARECON_PROCESSES"):
        config_from_sources({"handler": "m:f", "group": "g", "topics": ("t",)}, env)


def test_missing_handler_is_named() -> None:
    with pytest.raises(errors.ConfigError, match="a handler is needed"):
        config_from_sources({"group": "g", "topics": ("t",)}, {})


def test_toml_file_with_flag_names(tmp_path: Path) -> None:
    path = tmp_path / "worker.toml"
    path.write_text(
        textwrap.dedent(
            """
            handler = "tests.worker.handlers:record_id"
            group = "billing"
            topic = "invoices"
            processes = 2
            dlq-after = 3
            handler-timeout = 1.5
            tls = true
            """
        )
    )
    settings = load_toml(path)
    assert settings == {
        "handler": "tests.worker.handlers:record_id",
        "group": "billing",
        "topics": ("invoices",),
        "processes": 2,
        "dlq_after": 3,
        "handler_timeout": 1.5,
        "tls": True,
    }


def test_toml_worker_table_and_errors(tmp_path: Path) -> None:
    good = tmp_path / "a.toml"
    good.write_text('[worker]\ngroup = "g"\ntopics = ["x", "y"]\n')
    assert load_toml(good) == {"group": "g", "topics": ("x", "y")}
    unknown = tmp_path / "b.toml"
    unknown.write_text('colour = "blue"\n')
    with pytest.raises(errors.ConfigError, match="unknown setting 'colour'"):
        load_toml(unknown)
    wrong = tmp_path / "c.toml"
    wrong.write_text('processes = "two"\n')
    with pytest.raises(errors.ConfigError, match="processes"):
        load_toml(wrong)
    broken = tmp_path / "d.toml"
    broken.write_text("processes = \n")
    with pytest.raises(errors.ConfigError, match="not valid TOML"):
        load_toml(broken)
    with pytest.raises(errors.ConfigError, match="no-such.toml"):
        load_toml(tmp_path / "no-such.toml")


# -- handlers --------------------------------------------------------------------------------


def test_handler_spec_and_load_round_trip() -> None:
    spec = handler_spec(handlers.record_id)
    assert spec == "tests.worker.handlers:record_id"
    assert load_handler(spec) is handlers.record_id
    assert handler_spec("a.b:c") == "a.b:c"


def test_handlers_that_cannot_be_imported_are_refused() -> None:
    def nested(record: object) -> None:
        pass

    with pytest.raises(errors.ConfigError, match="cannot be imported"):
        handler_spec(nested)
    with pytest.raises(errors.ConfigError, match="cannot be imported"):
        handler_spec(lambda r: None)
    with pytest.raises(errors.ConfigError, match="cannot import no_such_module"):
        load_handler("no_such_module:f")
    with pytest.raises(errors.ConfigError, match="has no 'nope'"):
        load_handler("tests.worker.handlers:nope")
    with pytest.raises(errors.ConfigError, match="not callable"):
        load_handler("tests.worker.handlers:OUT_ENV")


def test_handler_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "my_handlers.py"
    path.write_text("def handle(record):\n    return record * 2\n")
    assert load_handler(f"{path}:handle")(21) == 42
    with pytest.raises(errors.ConfigError, match="no such file"):
        load_handler(f"{tmp_path / 'missing.py'}:handle")
    broken = tmp_path / "broken.py"
    broken.write_text("raise ValueError('bad module')\n")
    with pytest.raises(errors.ConfigError, match="raised ValueError: bad module"):
        load_handler(f"{broken}:handle")


def test_a_handler_file_imports_the_modules_next_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32, docs: ``path/to/file.py:function`` imports siblings of that file, as
    ``python path/to/file.py`` would, from any working directory."""
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "issue32_pricing.py").write_text("RATE = 3\n")
    (folder / "issue32_handler.py").write_text(
        "import issue32_pricing\n\ndef handle(record):\n    return record * issue32_pricing.RATE\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "issue32_pricing", raising=False)
    assert load_handler("app/issue32_handler.py:handle")(2) == 6


# -- per-record bookkeeping in a worker process ------------------------------------------------


class _FakeRecord(SimpleNamespace):
    released = False


def _record(delivery_count: int = 1) -> Any:
    return _FakeRecord(topic="t", partition=0, offset=7, delivery_count=delivery_count, value=b"v")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_wrapped_handler_counts_outcomes(anyio_backend: str) -> None:
    stats = Stats()
    seen: list[int] = []

    async def ok(record: Any) -> None:
        seen.append(record.delivery_count)

    async def bad(record: Any) -> None:
        raise KeyError("x")

    await wrap_handler(ok, stats, dlq_after=2)(_record(1))
    await wrap_handler(ok, stats, dlq_after=2)(_record(3))
    with pytest.raises(KeyError):
        await wrap_handler(bad, stats, dlq_after=2)(_record(1))
    with pytest.raises(KeyError):
        await wrap_handler(bad, stats, dlq_after=2)(_record(2))
    report = stats.report()
    assert (report["handled"], report["failed"], report["dlq"], report["redelivered"]) == (
        2,
        2,
        1,
        2,
    )
    assert report["in_flight"] == 0 and report["oldest"] is None
    assert seen == [1, 3]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_sync_handler_runs_in_a_thread(anyio_backend: str) -> None:
    import threading

    stats = Stats()
    threads: list[threading.Thread] = []

    def handler(record: Any) -> None:
        threads.append(threading.current_thread())

    await wrap_handler(handler, stats, None)(_record())
    assert threads and threads[0] is not threading.main_thread()
    assert stats.handled == 1


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_records_handed_out_while_draining_are_handled_not_held(
    anyio_backend: str,
) -> None:
    # The consumer fetches nothing once the drain began: what process() still hands out
    # was acquired before, and releasing it would spend a delivery attempt for nothing.
    stats = Stats()
    calls: list[int] = []

    async def handler(record: Any) -> None:
        calls.append(record.offset)

    wrapped = wrap_handler(handler, stats, None)
    await wrapped(_record())
    stats.start_draining()
    with anyio.fail_after(5):
        await wrapped(_record())
    assert calls == [7, 7]
    report = stats.report()
    assert (report["handled"], report["finished_in_drain"], report["draining"]) == (2, 1, True)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_busy_is_the_share_of_handler_slots_in_use_since_the_last_report(
    anyio_backend: str,
) -> None:
    stats = Stats(concurrency=4)
    stats.busy()  # a new period starts
    release = anyio.Event()

    async def slow(record: Any) -> None:
        await release.wait()

    wrapped = wrap_handler(slow, stats, None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(wrapped, _record())
        tg.start_soon(wrapped, _record())
        await anyio.sleep(0.2)
        # Two of four slots for the whole period: one half, give or take the start-up.
        assert 0.4 <= stats.busy() <= 0.5
        await anyio.sleep(0.2)
        release.set()
    await anyio.sleep(0.2)
    # Two slots for about half of this period, then none.
    assert 0.1 <= stats.busy() <= 0.4
    await anyio.sleep(0.1)
    assert stats.busy() == 0.0


def test_progress_line() -> None:
    line = format_progress(
        [10.0, 20.5],
        in_flight=3,
        handled=1234,
        failed=1,
        dlq=0,
        redelivered=2,
        restarts=1,
        expired=1500,
        released=19,
        lost=7,
    )
    assert line == (
        "sharecon worker: 30.5 rec/s (p0 10.0 p1 20.5) | handled 1,234 | in flight 3 | "
        "failed 1 | dlq 0 | redelivered 2 | expired unseen 1,500 | released unseen 19 | "
        "lost unseen 7 | restarts 1"
    )


# -- command line ----------------------------------------------------------------------------


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sharecon.cli", "worker", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("no_such_module:f", "-g", "g", "-t", "t"), "cannot import no_such_module"),
        (("-g", "g", "-t", "t"), "a handler is needed"),
        (("tests.worker.handlers:record_id", "-t", "t"), "a group is needed"),
        (
            ("tests.worker.handlers:record_id", "-g", "g", "-t", "t", "-p", "0"),
            "must be at least 1",
        ),
        (("--config", "/no/such/worker.toml"), "/no/such/worker.toml"),
    ],
)
def test_cli_usage_errors_exit_2(args: tuple[str, ...], message: str) -> None:
    done = _cli(*args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_cli_help_documents_worker_exit_codes() -> None:
    done = _cli("--help")
    assert done.returncode == 0
    assert "worker exit codes: 0 drained" in done.stdout
    assert "--handler-timeout" in done.stdout and "--dlq-after" in done.stdout


def test_cli_unreachable_cluster_exits_5_before_starting_processes() -> None:
    done = _cli("tests.worker.handlers:record_id", "-g", "g", "-t", "t", "-b", "127.0.0.1:1")
    assert done.returncode == 5, done.stderr
    assert "could not reach any bootstrap broker" in done.stderr
    assert "process 0 started" not in done.stderr


def test_cli_config_file_with_an_unknown_key_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "worker.toml"
    path.write_text('group = "g"\ncolour = "blue"\n')
    done = _cli("tests.worker.handlers:record_id", "-t", "t", "--config", str(path))
    assert done.returncode == 2, done.stderr
    assert "unknown setting 'colour'" in done.stderr


def test_cli_autoscale_range_is_checked_before_anything_starts() -> None:
    done = _cli("tests.worker.handlers:record_id", "-g", "g", "-t", "t", "--autoscale", "3:2")
    assert done.returncode == 2, done.stderr
    assert "autoscale must be MIN:MAX with 1 <= MIN <= MAX" in done.stderr


def test_autoscale_settings_make_the_policy() -> None:
    config = WorkerConfig(
        handler="m:f",
        group="g",
        topics=("t",),
        concurrency=8,
        autoscale="2:5",
        scale_cooldown=4.0,
        scale_up_after=1.0,
        scale_down_after=9.0,
    )
    policy = autoscale_policy(config)
    assert policy is not None
    assert (policy.minimum, policy.maximum, policy.cooldown) == (2, 5, 4.0)
    assert (policy.up_after, policy.down_after) == (1.0, 9.0)
    # The backlog threshold defaults to one process's worth of handler slots.
    assert policy.backlog_high == policy.backlog_low == 8
    assert autoscale_policy(WorkerConfig(handler="m:f", group="g", topics=("t",))) is None


# -- TLS files and --command-config -------------------------------------------------------------


def test_tls_files_and_key_password_from_the_environment_only(tmp_path: Path) -> None:
    env = {
        "SHARECON_TLS_CERT": "/certs/client.crt",
        "SHARECON_TLS_KEY": "/certs/client.key",
        "SHARECON_TLS_KEY_PASSWORD": "k3y-pw",
    }
    config = config_from_sources(
        {"handler": "m:f", "group": "g", "topics": ("t",), "tls_ca": "/certs/ca.pem"}, env
    )
    assert (config.tls_ca, config.tls_cert, config.tls_key) == (
        "/certs/ca.pem",
        "/certs/client.crt",
        "/certs/client.key",
    )
    assert config.tls_key_password == "k3y-pw" and "k3y-pw" not in repr(config)
    # The password travels to the worker processes in the stdin config, like the rest.
    assert WorkerConfig.from_dict(config.to_dict()) == config
    with pytest.raises(errors.ConfigError, match="tls_key needs tls_cert"):
        _config(tls_key="/certs/client.key")


def test_command_config_gives_security_and_bootstrap(tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text(
        "bootstrap.servers=kafka-1.internal:9092\n"
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
        'required username="w" password="pw";\n'
        "client.id=billing-worker\n"
    )
    # The environment's security variables are not read next to a properties file...
    env = {"SHARECON_SASL_USERNAME": "other", "SHARECON_TLS_CA": "/nope.pem"}
    base = {"handler": "m:f", "group": "g", "topics": ("t",), "command_config": str(props)}
    config = config_from_sources(base, env)
    assert config.bootstrap_servers() == "kafka-1.internal:9092"
    kwargs = config.client_kwargs()
    assert kwargs["config"].sasl.username == "w"
    assert kwargs["config"].client_id == "billing-worker"
    assert _config(command_config=str(props), bootstrap="127.0.0.1:19092").bootstrap_servers() == (
        "127.0.0.1:19092"
    )
    # ...but a flag for them is a clash.
    with pytest.raises(errors.ConfigError, match="drop tls_ca"):
        config_from_sources({**base, "tls_ca": "/certs/ca.pem"}, {})


def test_health_settings_from_flag_environment_and_toml(tmp_path: Path) -> None:
    base = {"handler": "m:f", "group": "g", "topics": ("t",)}
    assert config_from_sources(base, {}).health_port is None
    env = {"SHARECON_HEALTH_PORT": "8080", "SHARECON_HEALTH_HOST": "0.0.0.0"}
    from_env = config_from_sources(base, env)
    assert (from_env.health_port, from_env.health_host) == (8080, "0.0.0.0")
    assert config_from_sources({**base, "health_port": 9000}, env).health_port == 9000
    path = tmp_path / "worker.toml"
    path.write_text('health-port = 7070\nhealth-host = "::1"\n')
    from_toml = config_from_sources(base, {}, load_toml(path))
    assert (from_toml.health_port, from_toml.health_host) == (7070, "::1")
    with pytest.raises(errors.ConfigError, match="SHARECON_HEALTH_PORT"):
        config_from_sources(base, {"SHARECON_HEALTH_PORT": "http"})


def test_health_of_names_the_first_reason() -> None:
    from sharecon._net.health import ClusterHealth
    from sharecon.consumer import ConsumerHealth

    up = ClusterHealth(True, True, (), None, None)
    down = ClusterHealth(False, True, (), 1.0, "connection refused")

    def health(**kw: Any) -> ConsumerHealth:
        fields: dict[str, Any] = {
            "ok": False,
            "running": True,
            "member_state": "stable",
            "failed": None,
            "assigned_partitions": 1,
            "buffered_records": 0,
            "cluster": up,
            **kw,
        }
        return ConsumerHealth(**fields)

    assert health_of(health(ok=True)) == (True, "ok")
    assert health_of(health(failed="GroupAuthorizationFailedError: no")) == (
        False,
        "consumer failed: GroupAuthorizationFailedError: no",
    )
    assert health_of(health(member_state="joining")) == (False, "group membership joining")
    assert health_of(health(cluster=down)) == (
        False,
        "brokers unreachable: connection refused",
    )
    assert health_of(health(stuck_for=42.0)) == (False, "records stuck at a leader for 42 s")
    assert health_of(health(dead_letter_breaker="101 of the last 101 ...")) == (
        False,
        "dead-letter circuit breaker open: 101 of the last 101 ...",
    )
