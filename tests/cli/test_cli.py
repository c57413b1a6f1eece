"""The ``sharecon`` command line, run as a subprocess against a real broker.

Each test states the contract it checks: what goes to stdout, the one-line error on
stderr, and the exit code scripts rely on (0 ok, 1 Kafka, 2 usage, 3 not found, 4 bad
input, 5 unreachable, 130 interrupted).
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import uuid
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.admin import Admin
from sharecon.cli import build_parser
from sharecon.consumer import ShareConsumer
from sharecon.dlq import DLQ_PREFIX, DLQ_VALUE_DROPPED, dead_letter_headers
from sharecon.producer import Producer, ProducerRecord
from sharecon.record import Record
from sharecon.testing import SaslSetup
from sharecon.types import ZERO_UUID, TopicIdPartition

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sharecon.testing.pytest_plugin import BrokerFactory, TopicFactory

CLI = [sys.executable, "-m", "sharecon.cli"]
UNREACHABLE = "127.0.0.1:1"


def cli(
    *args: str,
    input: str | bytes | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 90,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m sharecon.cli ARGS``; stdout/stderr as text."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("SHARECON_")}
    full_env.update(env or {})
    data = input.encode() if isinstance(input, str) else input
    proc = subprocess.run(
        [*CLI, *args],
        input=data,
        capture_output=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode()
    )


def assert_clean_error(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    """Exit ``code``, one line on stderr naming ``needles``, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def read_back(bootstrap: str, topic: str, n: int, timeout: float = 30) -> list[Record]:
    """``n`` records of ``topic`` through a fresh share group (earliest), with our consumer."""

    async def main() -> list[Record]:
        group = unique("reader")
        async with Admin(bootstrap) as admin:
            await admin.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
        out: list[Record] = []
        async with ShareConsumer(bootstrap, group_id=group, topics=[topic]) as consumer:
            with anyio.fail_after(timeout):
                async for record in consumer:
                    out.append(record)
                    if len(out) == n:
                        break
            # The n-th record is still in hand after the break: commit() accepts it (the
            # next poll() would release it, as it does a record whose handler raised).
            await consumer.commit()
            # Nothing more than n: a short wait must come back empty.
            extra = await consumer.poll(1.0)
            out.extend(extra)
        return out

    return anyio.run(main)


def produce(bootstrap: str, records: Sequence[ProducerRecord]) -> None:
    async def main() -> None:
        async with Producer(bootstrap) as producer:
            await producer.send_batch(records)

    anyio.run(main)


# -- no broker needed ------------------------------------------------------------------------


def test_help_explains_commands_and_exit_codes() -> None:
    """--help lists every subcommand, the environment variables and the exit codes."""
    proc = cli("--help")
    assert proc.returncode == 0
    for word in ("consume", "produce", "groups", "topics", "dlq", "bench", "SHARECON_BOOTSTRAP"):
        assert word in proc.stdout
    for code in ("0 ", "1 ", "2 ", "3 ", "4 ", "5 ", "130"):
        assert f"\n  {code}" in proc.stdout
    sub = cli("dlq", "replay", "--help")
    assert sub.returncode == 0
    assert "--dry-run" in sub.stdout and "sharecon-dlq-replay" in sub.stdout
    assert "exit codes:" in sub.stdout


def test_console_script_is_installed() -> None:
    """The `sharecon` entry point runs the same program."""
    script = pathlib.Path(sys.executable).parent / "sharecon"
    assert script.exists(), "pip install -e . should have created the console script"
    proc = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    assert proc.returncode == 0 and proc.stdout.startswith("sharecon ")


@pytest.mark.parametrize(
    "args",
    [
        ("consume", "t"),  # --group missing
        ("nonsense",),
        ("consume", "t", "-g", "g", "--max", "0"),
        ("topics",),
    ],
)
def test_usage_errors_exit_2(args: tuple[str, ...]) -> None:
    proc = cli(*args)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "usage:" in proc.stderr


def _all_parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    found: list[tuple[str, argparse.ArgumentParser]] = []

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        found.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child_name, child in action.choices.items():
                    walk(f"{name} {child_name}", child)

    walk("sharecon", build_parser())
    return found


def test_help_texts_are_plain_text() -> None:
    """No reST markup (``code``, :class:) in any --help: a terminal shows it as is."""
    parsers = _all_parsers()
    assert {"sharecon bench", "sharecon groups config", "sharecon groups delete"} <= {
        name for name, _ in parsers
    }
    for name, parser in parsers:
        text = parser.format_help()
        assert "``" not in text and ":class:" not in text and ":func:" not in text, name
    bench = cli("bench", "--help")
    assert bench.returncode == 0 and "``" not in bench.stdout and "fresh topic" in bench.stdout


@pytest.mark.parametrize(
    ("args", "usage"),
    [
        (("consume", "t", "-g", "g", "--bogus"), "usage: sharecon consume "),
        (
            ("groups", "reset", "g", "-t", "t", "--to-latest", "--nope"),
            "usage: sharecon groups reset ",
        ),
        (("dlq", "inspect", "d", "--nope"), "usage: sharecon dlq inspect "),
    ],
)
def test_unknown_option_shows_the_subcommands_usage(args: tuple[str, ...], usage: str) -> None:
    proc = cli(*args)
    assert proc.returncode == 2
    assert proc.stderr.startswith(usage), proc.stderr
    prefix = usage.removeprefix("usage: ").strip()
    assert f"{prefix}: error: unrecognized arguments: {args[-1]}" in proc.stderr


def test_bootstrap_with_a_url_scheme_is_a_usage_error() -> None:
    proc = cli("topics", "list", "-b", "kafka://localhost:9092")
    assert_clean_error(proc, 2, "'kafka://localhost:9092'", "scheme (kafka://) is not accepted")
    assert "IPv6" not in proc.stderr


def test_value_only_and_json_do_not_go_together() -> None:
    proc = cli("consume", "t", "-g", "g", "--json", "--value-only")
    assert proc.returncode == 2
    assert "--value-only: not allowed with argument --json" in proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("topics", "list"),
        ("groups", "list"),
        ("groups", "describe", "g"),
        ("consume", "t", "-g", "g"),
        ("produce", "t"),
        ("dlq", "inspect", "d"),
    ],
)
def test_wrong_bootstrap_is_one_line_exit_5(args: tuple[str, ...]) -> None:
    """An unreachable cluster: exit 5 within about --timeout, naming the address."""
    start = time.monotonic()
    proc = cli(*args, "--bootstrap", UNREACHABLE, "--timeout", "1", input="x\n")
    assert_clean_error(proc, 5, "could not reach", UNREACHABLE)
    assert time.monotonic() - start < 15


def test_refused_bootstrap_fails_fast_with_the_default_timeout() -> None:
    """Every address refuses: exit 5 in seconds, not after the 30 s default --timeout."""
    start = time.monotonic()
    proc = cli("consume", "t", "-g", "g", "--bootstrap", UNREACHABLE)
    assert_clean_error(proc, 5, f"{UNREACHABLE} refused the connection")
    assert time.monotonic() - start < 8


def test_bootstrap_and_timeout_from_environment() -> None:
    """SHARECON_BOOTSTRAP / SHARECON_TIMEOUT apply when the options are not given."""
    proc = cli("topics", "list", env={"SHARECON_BOOTSTRAP": UNREACHABLE, "SHARECON_TIMEOUT": "1"})
    assert_clean_error(proc, 5, UNREACHABLE, "within 1 s")
    proc = cli("topics", "list", env={"SHARECON_TIMEOUT": "soon"})
    assert_clean_error(proc, 2, "SHARECON_TIMEOUT")


def test_sasl_password_is_never_echoed() -> None:
    """Incomplete SASL settings are a usage error; the password appears nowhere."""
    secret = "s3cret-Pa55"
    proc = cli(
        "topics",
        "list",
        "--sasl-username",
        "alice",
        env={"SHARECON_SASL_PASSWORD": secret, "SHARECON_BOOTSTRAP": UNREACHABLE},
    )
    assert_clean_error(proc, 2, "--sasl-mechanism")
    assert secret not in proc.stderr + proc.stdout
    proc = cli(
        "topics",
        "list",
        "--sasl-mechanism",
        "scram-sha-256",
        "--sasl-username",
        "alice",
        "--sasl-password",
        secret,
        "--bootstrap",
        UNREACHABLE,
        "--timeout",
        "1",
    )
    assert_clean_error(proc, 5)
    assert secret not in proc.stderr + proc.stdout


def test_tls_ca_file_missing_is_usage_error(tmp_path: pathlib.Path) -> None:
    proc = cli("topics", "list", "--tls-ca", str(tmp_path / "nope.pem"))
    assert_clean_error(proc, 2, "nope.pem")


# -- topics ----------------------------------------------------------------------------------


def test_topics_create_list_describe_delete(kafka_bootstrap: str) -> None:
    name = unique("cli-topic")
    b = ("--bootstrap", kafka_bootstrap)
    proc = cli("topics", "create", name, "--partitions", "2", "-c", "retention.ms=60000", *b)
    assert proc.returncode == 0, proc.stderr
    again = cli("topics", "create", name, *b)
    assert_clean_error(again, 1, repr(name), "already exists")
    assert cli("topics", "create", name, "--if-not-exists", *b).returncode == 0

    listing = json_lines(cli("topics", "list", "--json", *b).stdout)
    mine = [t for t in listing if t["topic"] == name]
    assert len(mine) == 1 and mine[0]["partitions"] == 2
    described = json_lines(cli("topics", "describe", name, "--json", *b).stdout)
    assert [p["partition"] for p in described[0]["partitions"]] == [0, 1]  # type: ignore[union-attr]

    assert cli("topics", "delete", name, *b).returncode == 0
    assert name not in cli("topics", "list", *b).stdout
    assert_clean_error(cli("topics", "describe", name, *b), 3, repr(name), "does not exist")
    assert_clean_error(cli("topics", "delete", name, *b), 3, repr(name))
    assert cli("topics", "delete", name, "--if-exists", *b).returncode == 0


# -- produce / consume -----------------------------------------------------------------------


def test_produce_lines_then_consume_json_round_trip(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """Lines with a key separator and a header arrive intact; accepted records are done."""
    topic = topic_factory(1)
    b = ("-b", kafka_bootstrap)
    text = "k1:hello\nplain\nk3:three:colons\n\nk5:été\n"
    proc = cli("produce", topic, "--key-separator", ":", "-H", "src=cli", *b, input=text)
    assert proc.returncode == 0, proc.stderr
    assert "5 record(s) sent" in proc.stderr

    proc = cli("consume", topic, "-g", share_group, "--max", "5", "--json", *b)
    assert proc.returncode == 0, proc.stderr
    rows = json_lines(proc.stdout)
    assert [(r["key"], r["value"]) for r in rows] == [
        ("k1", "hello"),
        (None, "plain"),
        ("k3", "three:colons"),
        (None, ""),
        ("k5", "été"),
    ]
    assert all(r["headers"] == [{"key": "src", "value": "cli"}] for r in rows)
    assert [r["offset"] for r in rows] == [0, 1, 2, 3, 4]
    assert all(r["delivery_count"] == 1 and r["partition"] == 0 for r in rows)
    assert set(rows[0]) >= {"topic", "timestamp"}

    # Accepted: the same group gets nothing more.
    proc = cli("consume", topic, "-g", share_group, "--idle", "1", "--json", *b)
    assert proc.returncode == 0 and proc.stdout == ""


def test_binary_json_round_trip_through_a_pipe(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: object
) -> None:
    """Non-UTF-8 bytes are base64 and say so; consume --json feeds produce --format json."""
    source, copy = topic_factory(1), topic_factory(1)
    b = ("-b", kafka_bootstrap)
    raw = bytes(range(250, 256)) + b"\x00"
    lines = [
        {
            "key": "a",
            "value": base64.b64encode(raw).decode(),
            "value_encoding": "base64",
            "headers": [
                {"key": "bin", "value": base64.b64encode(raw).decode(), "encoding": "base64"},
                {"key": "none", "value": None},
            ],
        },
        {"key": None, "value": {"amount": 3}, "headers": {"h": "v"}},
        {"value": None, "key": "tombstone"},
    ]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    assert cli("produce", source, "--format", "json", *b, input=text).returncode == 0

    first = cli("consume", source, "-g", unique("g"), "--earliest", "--max", "3", "--json", *b)
    assert first.returncode == 0, first.stderr
    rows = json_lines(first.stdout)
    assert rows[0]["value_encoding"] == "base64"
    assert base64.b64decode(str(rows[0]["value"])) == raw
    assert rows[0]["headers"] == [
        {"key": "bin", "value": base64.b64encode(raw).decode(), "encoding": "base64"},
        {"key": "none", "value": None},
    ]
    assert rows[1]["value"] == '{"amount":3}' and "value_encoding" not in rows[1]
    assert rows[2]["value"] is None

    assert cli("produce", copy, "--format", "json", *b, input=first.stdout).returncode == 0
    records = read_back(kafka_bootstrap, copy, 3)
    assert [(r.key, r.value) for r in records] == [
        (b"a", raw),
        (None, b'{"amount":3}'),
        (b"tombstone", None),
    ]
    assert records[0].headers == (("bin", raw), ("none", None))


def test_text_output_tells_a_missing_value_from_the_text_null(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    b = ("-b", kafka_bootstrap)
    lines = [
        {"key": None, "value": None},
        {"key": "null", "value": "null"},
        {"key": "k", "value": "tab\there", "headers": {"h": None, "n": "null"}},
    ]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    assert cli("produce", topic, "--format", "json", *b, input=text).returncode == 0
    proc = cli("consume", topic, "-g", share_group, "--max", "3", *b)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("\t")[1:] for line in proc.stdout.splitlines()]
    assert rows == [
        ["key=null", "null"],
        ['key="null"', '"null"'],
        ["key=k", '"tab\\there"', 'headers=h=null,n="null"'],
    ]


def test_bad_json_line_names_the_line_and_keeps_earlier_records(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(1)
    text = '{"value": "one"}\n{"value": "two"}\n{"value": oops}\n{"value": "four"}\n'
    proc = cli("produce", topic, "--format", "json", "-b", kafka_bootstrap, input=text)
    assert_clean_error(proc, 4, "line 3", "invalid JSON", "2 record(s)")
    assert [r.value for r in read_back(kafka_bootstrap, topic, 2)] == [b"one", b"two"]

    proc = cli("produce", topic, "--format", "json", "-b", kafka_bootstrap, input="[1, 2]\n")
    assert_clean_error(proc, 4, "line 1", "JSON object")
    proc = cli(
        "produce",
        topic,
        "--format",
        "json",
        "-b",
        kafka_bootstrap,
        input='{"value": "!!", "value_encoding": "base64"}\n',
    )
    assert_clean_error(proc, 4, "line 1", "base64")


def test_produce_from_file(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: pathlib.Path
) -> None:
    topic = topic_factory(1)
    path = tmp_path / "in.txt"
    path.write_bytes(b"".join(b"line-%d\n" % i for i in range(2000)))
    proc = cli(
        "produce", topic, "--file", str(path), "--compression", "zstd", "-b", kafka_bootstrap
    )
    assert proc.returncode == 0, proc.stderr
    assert "2000 record(s) sent" in proc.stderr
    values = [r.value for r in read_back(kafka_bootstrap, topic, 2000)]
    assert values == [b"line-%d" % i for i in range(2000)]
    missing = cli("produce", topic, "--file", str(tmp_path / "nope"), "-b", kafka_bootstrap)
    assert_clean_error(missing, 4, "nope")


def test_unknown_topic_is_exit_3(kafka_bootstrap: str) -> None:
    name = unique("missing")
    b = ("-b", kafka_bootstrap)
    assert_clean_error(cli("consume", name, "-g", "g", *b), 3, repr(name), "does not exist")
    assert_clean_error(cli("produce", name, *b, input="x\n"), 3, repr(name))
    assert_clean_error(cli("dlq", "inspect", name, *b), 3, repr(name))
    assert_clean_error(cli("dlq", "replay", "--from", name, "--to", name, *b), 3, repr(name))


def test_ack_release_redelivers_and_reject_archives(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    b = ("-b", kafka_bootstrap)
    assert cli("produce", topic, *b, input="a\nb\n").returncode == 0
    released = cli(
        "consume", topic, "-g", share_group, "--max", "2", "--ack", "release", "--json", *b
    )
    assert released.returncode == 0, released.stderr
    assert [r["delivery_count"] for r in json_lines(released.stdout)] == [1, 1]
    rejected = cli("consume", topic, "-g", share_group, "--max", "2", "--ack", "reject", *b)
    assert rejected.returncode == 0
    # Text mode: one line per record, redelivered (delivery 2).
    lines = rejected.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines] == [f"{topic}-0@0", f"{topic}-0@1"]
    assert all(line.endswith("delivery=2") for line in lines)
    after = cli("consume", topic, "-g", share_group, "--idle", "1", *b)
    assert after.returncode == 0 and after.stdout == ""


def test_a_peek_costs_only_the_records_it_shows(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """Six ``--max 1`` peeks of a fresh 20-record topic show six records and use up no
    other record's delivery attempts (Kafka 4.2+ acquires only what is asked)."""
    topic = topic_factory(1)
    b = ("-b", kafka_bootstrap)
    lines = "".join(f"r{i}\n" for i in range(20))
    assert cli("produce", topic, *b, input=lines).returncode == 0
    shown = []
    for _ in range(6):
        peek = cli("consume", topic, "-g", share_group, "--earliest", "--max", "1", "--json", *b)
        assert peek.returncode == 0, peek.stderr
        assert "cannot limit" not in peek.stderr
        shown += json_lines(peek.stdout)
    assert [r["value"] for r in shown] == [f"r{i}" for i in range(6)]
    # Nothing else was acquired and given back: every other record is still on its
    # first delivery.
    rest = cli("consume", topic, "-g", share_group, "--max", "14", "--json", *b)
    assert rest.returncode == 0, rest.stderr
    assert [(r["value"], r["delivery_count"]) for r in json_lines(rest.stdout)] == [
        (f"r{i}", 1) for i in range(6, 20)
    ]


def test_a_peek_on_kafka_41_says_it_cannot_limit_before_it_acts(
    kafka_broker_factory: BrokerFactory,
) -> None:
    broker = kafka_broker_factory("4.1")
    topic = f"peek-{uuid.uuid4().hex[:8]}"
    broker.tools.create_topic(topic, 1)
    b = ("-b", broker.bootstrap)
    assert cli("produce", topic, *b, input="x\ny\n").returncode == 0
    peek = cli("consume", topic, "-g", f"g-{uuid.uuid4().hex[:8]}", "--earliest", "--max", "1", *b)
    assert peek.returncode == 0, peek.stderr
    assert "cannot limit what a fetch acquires" in peek.stderr
    assert peek.stderr.index("cannot limit") < peek.stderr.index("record(s) consumed")


def test_consume_into_a_closed_pipe_ends_at_once_and_accepts_only_what_was_written(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """`consume | head -2`: the command ends once its reader is gone, even with nothing left
    to print; a record it could not write is released, never accepted."""
    topic = topic_factory(1)
    b = ("-b", kafka_bootstrap)
    assert cli("produce", topic, *b, input="".join(f"r{i}\n" for i in range(100))).returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARECON_")}

    async def all_done() -> None:
        async with Admin(kafka_bootstrap) as admin:
            with anyio.fail_after(30):
                while True:
                    offsets = await admin.describe_share_group_offsets(share_group, [topic])
                    # Lag 0: every record delivered and accepted.
                    if [(o.start_offset >= 0, o.lag) for o in offsets.values()] == [(True, 0)]:
                        return
                    await anyio.sleep(0.2)

    # A reader that reads all 100 lines (each accepted once read) and leaves while the
    # consumer waits for more.
    proc = subprocess.Popen(
        [*CLI, "consume", topic, "-g", share_group, *b],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(100)]
        anyio.run(all_done)
        proc.stdout.close()
        _out, err = proc.communicate(timeout=30)  # it used to wait for records forever
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert [line.split(b"\t")[0] for line in lines[:2]] == [
        f"{topic}-0@{i}".encode() for i in (0, 1)
    ]
    assert proc.returncode == 0 and b"Traceback" not in err

    # A reader gone before anything was written: nothing is accepted, so a second group
    # member gets all 100 records.
    other = unique("pipe")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        closed = subprocess.run(
            [*CLI, "consume", topic, "-g", other, "--earliest", *b],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=env,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert closed.returncode == 0 and b"Traceback" not in closed.stderr
    again = cli("consume", topic, "-g", other, "--max", "100", "--json", *b)
    assert again.returncode == 0, again.stderr
    assert sorted(int(str(r["offset"])) for r in json_lines(again.stdout)) == list(range(100))


@pytest.mark.parametrize(
    ("sig", "code", "word"),
    [(signal.SIGINT, 130, b"interrupted"), (signal.SIGTERM, 143, b"terminated")],
)
def test_consume_stopped_by_signal_leaves_the_group(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    share_group: str,
    sig: signal.Signals,
    code: int,
    word: bytes,
) -> None:
    """Ctrl-C / SIGTERM: a clean close (the member leaves), its own exit code, no traceback."""
    topic = topic_factory(1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARECON_")}
    proc = subprocess.Popen(
        [*CLI, "consume", topic, "-g", share_group, "-b", kafka_bootstrap],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # until it has joined
            desc = cli("groups", "describe", share_group, "--json", "-b", kafka_bootstrap)
            if desc.returncode == 0 and json.loads(desc.stdout)["members"]:
                break
            time.sleep(0.3)
        else:
            pytest.fail("the consumer never joined")
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert b"Traceback" not in err and word in err
    desc = cli("groups", "describe", share_group, "--json", "-b", kafka_bootstrap)
    assert json.loads(desc.stdout)["members"] == []


# -- groups ----------------------------------------------------------------------------------


def test_groups_list_describe_offsets_reset(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(2)
    b = ("-b", kafka_bootstrap)
    assert cli("produce", topic, "-p", "1", *b, input="a\nb\nc\n").returncode == 0
    assert cli("consume", topic, "-g", share_group, "--max", "3", *b).returncode == 0

    groups = json_lines(cli("groups", "list", "--json", *b).stdout)
    assert {"group": share_group, "state": "Empty"} in groups

    described = cli("groups", "describe", share_group, "--json", *b)
    assert described.returncode == 0
    desc = json.loads(described.stdout)
    assert desc["group"] == share_group and desc["members"] == []
    text = cli("groups", "describe", share_group, *b).stdout
    assert f"group:    {share_group}" in text and "members:  0" in text

    offsets = json_lines(
        cli("groups", "offsets", share_group, "--topic", topic, "--json", *b).stdout
    )
    by_partition = {o["partition"]: o for o in offsets}
    assert set(by_partition) == {0, 1}
    assert by_partition[1]["lag"] in (0, -1)

    # Back to offset 0 on partition 1: the three records come again.
    reset = cli(
        "groups", "reset", share_group, "--topic", topic, "--to-offset", "0", "--partition", "1", *b
    )
    assert reset.returncode == 0, reset.stderr
    again = cli("consume", topic, "-g", share_group, "--max", "3", "--value-only", *b)
    assert again.stdout.splitlines() == ["a", "b", "c"]

    # --to-latest: nothing old comes back.
    assert cli("groups", "reset", share_group, "--topic", topic, "--to-latest", *b).returncode == 0
    # Again: the state is already gone, so only the config is set (not an unknown topic).
    twice = cli("groups", "reset", share_group, "--topic", topic, "--to-latest", *b)
    assert twice.returncode == 0, twice.stderr
    assert "had no state on the topic" in twice.stderr
    later = cli("consume", topic, "-g", share_group, "--idle", "1", *b)
    assert later.returncode == 0 and later.stdout == ""


def test_unknown_group_is_exit_3(kafka_bootstrap: str) -> None:
    group = unique("no-such-group")
    for action in ("describe", "offsets"):
        proc = cli("groups", action, group, "-b", kafka_bootstrap)
        assert_clean_error(proc, 3, repr(group), "does not exist")


def _with_member(
    bootstrap: str, group: str, topic: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """Run the CLI with ``args`` while a ShareConsumer of ``group`` is a member."""

    async def main() -> subprocess.CompletedProcess[str]:
        async with ShareConsumer(bootstrap, group_id=group, topics=[topic]) as consumer:
            with anyio.fail_after(30):
                while not consumer.assignment:
                    await consumer.poll(0.2)
            return await anyio.to_thread.run_sync(lambda: cli(*args))

    return anyio.run(main)


def test_groups_delete(kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str) -> None:
    """A group with members, or a name that does not exist, deletes nothing; an empty group
    goes with its state; --if-exists skips missing names."""
    topic = topic_factory(1)
    b = ("-b", kafka_bootstrap)
    assert cli("produce", topic, *b, input="a\nb\n").returncode == 0
    assert cli("consume", topic, "-g", share_group, "--max", "1", *b).returncode == 0
    other, ghost = unique("del"), unique("ghost")
    assert cli("consume", topic, "-g", other, "--earliest", "--max", "1", *b).returncode == 0

    busy = _with_member(kafka_bootstrap, share_group, topic, "groups", "delete", share_group, *b)
    assert_clean_error(busy, 1, repr(share_group), "active members", "nothing was deleted")
    typo = cli("groups", "delete", other, ghost, *b)
    assert_clean_error(typo, 3, repr(ghost), "does not exist", "nothing was deleted")
    assert cli("groups", "describe", other, *b).returncode == 0  # still there

    proc = cli("groups", "delete", share_group, other, *b)
    assert proc.returncode == 0, proc.stderr
    assert f"share group {share_group!r} deleted" in proc.stderr
    assert f"share group {other!r} deleted" in proc.stderr
    for group in (share_group, other):
        assert_clean_error(cli("groups", "describe", group, *b), 3, repr(group))
    listed = {g["group"] for g in json_lines(cli("groups", "list", "--json", *b).stdout)}
    assert not {share_group, other} & listed
    # Its state went with it: a new group of that name starts over (earliest is kept as
    # a config) and gets the record the old one had accepted.
    again = cli("consume", topic, "-g", other, "--max", "2", "--value-only", *b)
    assert again.stdout.splitlines() == ["a", "b"]

    assert cli("groups", "delete", ghost, "--if-exists", *b).returncode == 0


def test_groups_config_read_set_delete(kafka_bootstrap: str) -> None:
    """Configs are read and changed without a consumer, even before the group exists."""
    group = unique("cfg")
    b = ("-b", kafka_bootstrap)
    shown = cli("groups", "config", group, "--json", *b)
    assert shown.returncode == 0, shown.stderr
    conf = json.loads(shown.stdout)
    assert conf["group"] == group and conf["exists"] is False
    assert "does not exist yet" in shown.stderr
    assert conf["configs"]["share.auto.offset.reset"] == {
        "value": "latest",
        "source": "default",
        "default": True,
    }
    assert {"share.record.lock.duration.ms", "share.delivery.count.limit"} <= set(conf["configs"])
    assert not any(name.startswith("consumer.") for name in conf["configs"])  # not a share config

    changed = cli(
        "groups", "config", group, "--set", "share.record.lock.duration.ms=45000",
        "--set", "share.delivery.count.limit=3", "--set", "share.isolation.level=read_committed",
        "--json", *b,
    )  # fmt: skip
    assert changed.returncode == 0, changed.stderr
    after = json.loads(changed.stdout)["configs"]
    assert after["share.record.lock.duration.ms"] == {
        "value": "45000",
        "source": "group",
        "default": False,
    }
    assert after["share.delivery.count.limit"]["value"] == "3"

    async def read() -> dict[str, str | None]:
        async with Admin(kafka_bootstrap) as admin:
            entries = await admin.describe_group_config(group)
        return {k: e.value for k, e in entries.items()}

    assert anyio.run(read)["share.isolation.level"] == "read_committed"  # really set

    removed = cli("groups", "config", group, "--delete", "share.isolation.level", *b)
    assert removed.returncode == 0, removed.stderr
    row = next(line for line in removed.stdout.splitlines() if "share.isolation.level" in line)
    assert row.split() == ["share.isolation.level", "read_uncommitted", "default"]
    assert "consumer.session.timeout.ms" in cli("groups", "config", group, "--all", *b).stdout

    unknown = cli("groups", "config", group, "--set", "share.no.such=1", *b)
    assert_clean_error(unknown, 1, repr(group), "share.no.such")
    bad = cli("groups", "config", group, "--set", "share.delivery.count.limit=many", *b)
    assert_clean_error(bad, 1, repr(group))
    both = cli("groups", "config", group, "--set", "a=1", "--delete", "a", *b)
    assert_clean_error(both, 2, "both set and deleted")
    assert_clean_error(cli("groups", "config", group, "--set", "novalue", *b), 2, "KEY=VALUE")


def test_groups_reset_of_a_group_that_does_not_exist_yet(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """--to-earliest/--to-latest set share.auto.offset.reset for the group's first consumer;
    --to-offset creates the group with those start offsets."""
    topic = topic_factory(1)
    b = ("-b", kafka_bootstrap)
    assert cli("produce", topic, *b, input="a\nb\nc\n").returncode == 0
    early, late, pinned = unique("new-early"), unique("new-late"), unique("new-pinned")

    proc = cli("groups", "reset", early, "--topic", topic, "--to-earliest", *b)
    assert proc.returncode == 0, proc.stderr
    assert "does not exist yet" in proc.stderr and "share.auto.offset.reset=earliest" in proc.stderr
    got = cli("consume", topic, "-g", early, "--max", "3", "--value-only", *b)
    assert got.stdout.splitlines() == ["a", "b", "c"]

    assert cli("groups", "reset", late, "--topic", topic, "--to-latest", *b).returncode == 0
    none = cli("consume", topic, "-g", late, "--idle", "1", *b)
    assert none.returncode == 0 and none.stdout == ""

    proc = cli("groups", "reset", pinned, "--topic", topic, "--to-offset", "1", *b)
    assert proc.returncode == 0, proc.stderr
    assert "did not exist" in proc.stderr
    offsets = json_lines(cli("groups", "offsets", pinned, "--json", *b).stdout)
    assert [(o["start_offset"], o["lag"]) for o in offsets] == [(1, 2)]
    got = cli("consume", topic, "-g", pinned, "--max", "2", "--value-only", *b)
    assert got.stdout.splitlines() == ["b", "c"]


def test_groups_reset_to_offset_past_the_end_starts_at_the_end(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """An offset past a partition's end is moved to the end, saying so; no negative lag."""
    topic = topic_factory(2)
    b = ("-b", kafka_bootstrap)
    assert cli("produce", topic, "-p", "0", *b, input="a\nb\nc\n").returncode == 0
    assert cli("produce", topic, "-p", "1", *b, input="".join(f"{i}\n" for i in range(20)))
    proc = cli("groups", "reset", share_group, "--topic", topic, "--to-offset", "10", *b)
    assert proc.returncode == 0, proc.stderr
    assert f"{topic}-0: offset 10 is past the end" in proc.stderr
    assert f"{topic}-1" not in proc.stderr.split("reset to")[0]  # partition 1 has offset 10
    offsets = {
        o["partition"]: (o["start_offset"], o["lag"])
        for o in json_lines(cli("groups", "offsets", share_group, "--json", *b).stdout)
    }
    assert offsets == {0: (3, 0), 1: (10, 10)}
    # The next record written to partition 0 is delivered: nothing is skipped.
    assert cli("produce", topic, "-p", "0", *b, input="d\n").returncode == 0
    got = cli("consume", topic, "-g", share_group, "--max", "11", "--json", *b)
    assert sorted((r["partition"], r["offset"]) for r in json_lines(got.stdout))[0] == (0, 3)


# -- dlq -------------------------------------------------------------------------------------


def _dlq_copy(
    dlq: str,
    source: str,
    offset: int,
    key: bytes,
    value: bytes,
    headers: list[tuple[str, bytes | None]],
) -> ProducerRecord:
    """A dead-letter copy as reject_to_dlq writes it (with the same header helper)."""
    original = Record(
        source,
        0,
        TopicIdPartition(ZERO_UUID, 0, source),
        None,
        None,
        None,
        offset,
        0,
        key,
        value,
        tuple(headers),
    )
    original.delivery_count = 4
    return ProducerRecord(
        dlq, value, key=key, headers=dead_letter_headers(original, "billing", f"bad {offset}")
    )


def test_dlq_inspect_and_replay_end_to_end(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """Replay moves key, value and original headers back; a second replay moves nothing."""
    source = topic_factory(1)
    dlq = topic_factory(2)
    target = topic_factory(1)
    b = ("-b", kafka_bootstrap)
    originals = [
        (b"k%d" % i, b"v%d" % i, [("trace", b"t%d" % i), ("raw", b"\xff\x00"), ("nil", None)])
        for i in range(5)
    ]
    produce(
        kafka_bootstrap,
        [_dlq_copy(dlq, source, 10 + i, k, v, h) for i, (k, v, h) in enumerate(originals)],
    )

    def inspect_groups() -> set[str]:
        listed = json_lines(cli("groups", "list", "--json", *b).stdout)
        return {str(g["group"]) for g in listed if str(g["group"]).startswith("sharecon-dlq-")}

    before = inspect_groups()
    # Inspect twice: non-destructive, dlq headers decoded, and no group left behind.
    for _ in range(2):
        proc = cli("dlq", "inspect", dlq, "--json", "--max", "5", *b)
        assert proc.returncode == 0, proc.stderr
        rows = json_lines(proc.stdout)
        assert len(rows) == 5
        assert "warning" not in proc.stderr
        assert inspect_groups() == before
    info = sorted((r["dlq"] for r in rows), key=lambda d: d["source_offset"])  # type: ignore[index,return-value]
    assert info[0] == {
        "source_topic": source,
        "source_partition": 0,
        "source_offset": 10,
        "delivery_count": 4,
        "group": "billing",
        "reason": "bad 10",
        "time": info[0]["time"],
        "time_ms": info[0]["time_ms"],
        "written_by": "sharecon",
    }
    text = cli("dlq", "inspect", dlq, "--max", "5", *b).stdout
    assert f"from={source}-0@12" in text and "reason=bad 12" in text

    dry = cli("dlq", "replay", "--from", dlq, "--to", target, "--dry-run", "--max", "5", *b)
    assert dry.returncode == 0 and dry.stdout.count("would replay") == 5
    assert inspect_groups() == before  # the dry run's throwaway group is gone too

    group = unique("replay")
    proc = cli("dlq", "replay", "--from", dlq, "--to", target, "--group", group, "--idle", "1", *b)
    assert proc.returncode == 0, proc.stderr
    assert f"5 record(s) replayed from {dlq} to {target} (5)" in proc.stderr

    records = read_back(kafka_bootstrap, target, 5)
    got = sorted((r.key, r.value, r.headers) for r in records)
    assert got == [(k, v, tuple(h)) for k, v, h in originals]
    assert not any(key.startswith(DLQ_PREFIX) for r in records for key, _ in r.headers)

    second = cli(
        "dlq", "replay", "--from", dlq, "--to", target, "--group", group, "--idle", "1", *b
    )
    assert second.returncode == 0
    assert f"0 record(s) replayed from {dlq} to {target} (nothing left" in second.stderr
    dry = cli(
        "dlq",
        "replay",
        "--from",
        dlq,
        "--to",
        target,
        "--group",
        group,
        "--dry-run",
        "--idle",
        "1",
        *b,
    )
    assert dry.returncode == 0 and "would replay" not in dry.stdout


def test_dlq_replay_defaults_to_source_topic_and_respects_max(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """Without --to each record goes back to its sharecon.dlq.topic; --max bounds the run."""
    source, dlq = topic_factory(1), topic_factory(1)
    b = ("-b", kafka_bootstrap)
    produce(kafka_bootstrap, [_dlq_copy(dlq, source, i, b"k", b"v%d" % i, []) for i in range(3)])
    proc = cli("dlq", "replay", "--from", dlq, "--max", "2", "--idle", "1", *b)
    assert proc.returncode == 0, proc.stderr
    assert f"2 record(s) replayed from {dlq} to {source} (2)" in proc.stderr
    rest = cli("dlq", "replay", "--from", dlq, "--idle", "1", *b)
    assert "1 record(s) replayed" in rest.stderr
    assert sorted(r.value for r in read_back(kafka_bootstrap, source, 3)) == [b"v0", b"v1", b"v2"]


def test_dlq_replay_skips_a_stub_and_says_so(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """A stub (a copy written without its value, too large for the dead-letter topic) has
    nothing to put back: replay moves the whole copies, skips the stub, counts it, and
    a second run finds nothing left; inspect still shows it."""
    source, dlq = topic_factory(1), topic_factory(1)
    b = ("-b", kafka_bootstrap)
    stub = _dlq_copy(dlq, source, 1, b"k1", b"", [])
    stub = dataclasses.replace(
        stub, value=None, headers=[*stub.headers, (DLQ_VALUE_DROPPED, b"2000000")]
    )
    produce(
        kafka_bootstrap,
        [
            _dlq_copy(dlq, source, 0, b"k0", b"v0", []),
            stub,
            _dlq_copy(dlq, source, 2, b"k2", b"v2", []),
        ],
    )
    dry = cli("dlq", "replay", "--from", dlq, "--dry-run", "--idle", "1", *b)
    assert dry.returncode == 0, dry.stderr
    assert f"would skip {dlq}-0@1" in dry.stdout
    assert "2 record(s) would be replayed" in dry.stderr and "1 skipped" in dry.stderr
    proc = cli("dlq", "replay", "--from", dlq, "--idle", "1", *b)
    assert proc.returncode == 0, proc.stderr
    assert f"2 record(s) replayed from {dlq} to {source} (2); 1 skipped" in proc.stderr
    assert sorted(r.value for r in read_back(kafka_bootstrap, source, 2)) == [b"v0", b"v2"]
    again = cli("dlq", "replay", "--from", dlq, "--idle", "1", *b)
    assert "0 record(s) replayed" in again.stderr and "skipped" not in again.stderr
    seen = cli("dlq", "inspect", dlq, "--max", "3", "--idle", "1", *b)
    assert "value-dropped=2000000B" in seen.stdout


def test_dlq_replay_failure_releases_and_exits_1(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """A record the target refuses is released (still in the DLQ) and the exit code is 1."""
    dlq = topic_factory(1)
    target = topic_factory(1, config={"max.message.bytes": "200"})
    b = ("-b", kafka_bootstrap)
    produce(kafka_bootstrap, [_dlq_copy(dlq, "src", 0, b"k", b"x" * 1000, [])])
    group = unique("replay")
    proc = cli("dlq", "replay", "--from", dlq, "--to", target, "--group", group, "--idle", "1", *b)
    assert_clean_error(proc, 1, f"{dlq}-0@0", target, "released")
    # Still there for the same group, delivered a second time.
    dry = cli("consume", dlq, "-g", group, "--max", "1", "--json", "--ack", "release", *b)
    assert [r["delivery_count"] for r in json_lines(dry.stdout)] == [2]


def test_dlq_replay_without_source_header_needs_to(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    dlq = topic_factory(1)
    b = ("-b", kafka_bootstrap)
    assert cli("produce", dlq, *b, input="plain\n").returncode == 0
    proc = cli("dlq", "replay", "--from", dlq, "--idle", "1", *b)
    assert_clean_error(proc, 2, "--to")


def test_dlq_inspect_and_replay_of_broker_written_dead_letters(
    kafka_broker_factory: BrokerFactory,
) -> None:
    """Kafka 4.4 writes dead letters itself with __dlq.errors.* headers: inspect decodes
    them (by=broker), and replay sends each back to its source topic without them."""
    broker = kafka_broker_factory("4.4")
    bootstrap = broker.bootstrap
    b = ("-b", bootstrap)
    # The broker only writes to topics with its DLQ prefix (errors.deadletterqueue.topic.name.prefix).
    source, dlq, group = unique("src"), unique("dlq.cli"), unique("g")

    async def reject_one() -> None:
        async with Admin(bootstrap) as admin:
            await admin.create_topics([source])
            await admin.create_topics(
                [dlq], configs={"errors.deadletterqueue.group.enable": "true"}
            )
        configured = cli(
            "groups", "config", group, "--set", "share.auto.offset.reset=earliest",
            "--set", f"errors.deadletterqueue.topic.name={dlq}",
            "--set", "errors.deadletterqueue.copy.record.enable=true", *b,
        )  # fmt: skip
        assert configured.returncode == 0, configured.stderr
        async with Producer(bootstrap) as producer:
            await producer.send_batch([ProducerRecord(source, b"poison", key=b"k")])
        async with ShareConsumer(
            bootstrap, group_id=group, topics=[source], ack_mode="explicit"
        ) as consumer:
            with anyio.fail_after(30):
                (record,) = await consumer.poll(30, max_records=1)
            record.reject()
            await consumer.commit()

    anyio.run(reject_one)
    deadline = time.monotonic() + 30
    while True:  # the broker writes the copy after the reject, asynchronously
        proc = cli("dlq", "inspect", dlq, "--json", "--idle", "1", *b)
        assert proc.returncode == 0, proc.stderr
        rows = json_lines(proc.stdout)
        if rows or time.monotonic() > deadline:
            break
    [row] = rows
    assert (row["key"], row["value"]) == ("k", "poison")
    info = row["dlq"]
    assert info == {
        "source_topic": source,
        "source_partition": 0,
        "source_offset": 0,
        "delivery_count": 1,
        "group": group,
        "reason": "Offset rejected by client.",
        "time": info["time"],  # type: ignore[index]
        "time_ms": row["timestamp"],
        "written_by": "broker",
    }
    text = cli("dlq", "inspect", dlq, "--idle", "1", *b).stdout
    assert f"from={source}-0@0" in text and "by=broker" in text
    assert "reason=Offset rejected by client." in text and "__dlq" not in text

    replayed = cli("dlq", "replay", "--from", dlq, "--idle", "1", *b)
    assert replayed.returncode == 0, replayed.stderr
    assert f"1 record(s) replayed from {dlq} to {source} (1)" in replayed.stderr
    records = read_back(bootstrap, source, 2)
    assert [(r.key, r.value, r.headers) for r in records] == [(b"k", b"poison", ())] * 2


# -- bench -----------------------------------------------------------------------------------


def test_bench_reports_rates(kafka_bootstrap: str) -> None:
    proc = cli("bench", "--records", "3000", "--size", "50", "--json", "-b", kafka_bootstrap)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["produce"]["records"] == 3000
    assert result["sharecon"]["records"] == 3000
    assert result["sharecon"]["bytes"] == 3000 * 50
    assert result["sharecon"]["records_per_s"] > 0
    topics = cli("topics", "list", "--json", "-b", kafka_bootstrap).stdout
    assert result["topic"] not in topics  # cleaned up


# -- security ----------------------------------------------------------------------------------

# Same settings as tests/broker/test_security_client.py, so a full run shares one broker.
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


def test_sasl_over_tls_from_environment(kafka_broker_factory: BrokerFactory) -> None:
    """SASL_SSL from SHARECON_* variables; a wrong password or an untrusted CA is exit 5."""
    broker = kafka_broker_factory(
        sasl=SaslSetup(mechanisms=("SCRAM-SHA-256",), users=USERS), tls=True
    )
    assert broker.tls_ca_file is not None
    env = {
        "SHARECON_BOOTSTRAP": broker.bootstrap,
        "SHARECON_TLS_CA": str(broker.tls_ca_file),
        "SHARECON_SASL_MECHANISM": "SCRAM-SHA-256",
        "SHARECON_SASL_USERNAME": "alice",
        "SHARECON_SASL_PASSWORD": USERS["alice"],
        "SHARECON_TIMEOUT": "5",
    }
    name = unique("secure")
    assert cli("topics", "create", name, env=env).returncode == 0
    listed = cli("topics", "list", env=env)
    assert listed.returncode == 0 and name in listed.stdout

    wrong = cli("topics", "list", env={**env, "SHARECON_SASL_PASSWORD": "not-it-123"})
    assert_clean_error(wrong, 5)
    assert "not-it-123" not in wrong.stderr
    untrusted = cli(
        "topics",
        "list",
        env={k: v for k, v in env.items() if k != "SHARECON_TLS_CA"} | {"SHARECON_TLS": "1"},
    )
    assert_clean_error(untrusted, 5)


def test_sasl_against_plaintext_listener_is_exit_5(kafka_bootstrap: str) -> None:
    """A listener without SASL: the handshake fails, exit 5, the password is not shown."""
    proc = cli(
        "topics", "list", "-b", kafka_bootstrap, "--timeout", "3",
        env={"SHARECON_SASL_MECHANISM": "PLAIN", "SHARECON_SASL_USERNAME": "u",
             "SHARECON_SASL_PASSWORD": "pw-9f8e7d"},
    )  # fmt: skip
    assert_clean_error(proc, 5, kafka_bootstrap)
    assert "pw-9f8e7d" not in proc.stderr


def test_tls_against_plaintext_listener_is_exit_5_within_seconds(kafka_bootstrap: str) -> None:
    """The broker hangs up on our ClientHello: that is definite, so the default 30 s
    --timeout is not waited out (it took 9.4 s and more); about 2 s of retries, as the
    docs say, then one line naming the likely cause."""
    start = time.monotonic()
    proc = cli("topics", "list", "-b", kafka_bootstrap, "--tls")
    elapsed = time.monotonic() - start
    assert_clean_error(proc, 5, kafka_bootstrap, "plaintext listener")
    # Not the timeout: the message would say "within 30 s". The bound on the time is
    # loose (Python's start-up on a busy machine); it took 30 s before.
    assert "within" not in proc.stderr
    assert elapsed < 20, elapsed


# -- input and output edges ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("consume", "t\udcff", "-g", "g"), "argument topics (b't\\xff')"),
        (("produce", "t", "-H", "k\udcff=v"), "argument header (b'k\\xff=v')"),
        (("topics", "list", "--sasl-password", "pw\udcff"), "argument sasl-password is"),
    ],
)
def test_arguments_that_are_not_utf8_are_usage_errors(args: tuple[str, ...], named: str) -> None:
    """Bytes that are not UTF-8 (a topic, a group, a header key) are exit 2 naming the
    argument, before anything connects (they were a Kafka error, exit 1, or exit 3); a
    password is never shown."""
    proc = cli(*args, "-b", UNREACHABLE, input="x\n")
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"error: {named}" in proc.stderr and "is not valid UTF-8 text" in proc.stderr
    assert "pw" not in proc.stderr.replace("sasl-password", "")


def test_consume_with_stdout_closed_is_a_usage_error_and_takes_nothing(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """`sharecon consume ... >&-`: exit 2 with a message, before joining the group, so no
    record is taken (it used to end in a traceback, exit 70)."""
    topic = topic_factory(1)
    b = ("-b", kafka_bootstrap)
    assert cli("produce", topic, *b, input="r0\nr1\nr2\n").returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARECON_")}
    closed = subprocess.run(
        [*CLI, "consume", topic, "-g", share_group, "--max", "3", *b],
        stderr=subprocess.PIPE,
        env=env,
        timeout=60,
        check=False,
        preexec_fn=lambda: os.close(1),
    )
    err = closed.stderr.decode()
    assert closed.returncode == 2, err
    assert "Traceback" not in err and "stdout is closed" in err
    # Every record is still there, on its first delivery.
    rest = cli("consume", topic, "-g", share_group, "--max", "3", "--json", *b)
    assert rest.returncode == 0, rest.stderr
    assert [(r["value"], r["delivery_count"]) for r in json_lines(rest.stdout)] == [
        (f"r{i}", 1) for i in range(3)
    ]


def test_interrupted_produce_says_what_was_sent_and_where_to_resume(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """Ctrl-C while produce waits for more input: exit 130 and a line saying how many
    records were acknowledged and which input line comes next (it said only "interrupted")."""
    topic = topic_factory(1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARECON_")}
    proc = subprocess.Popen(
        [*CLI, "produce", topic, "-b", kafka_bootstrap, "-q"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"a\n\nc\nd\n")  # four lines, one of them empty
        proc.stdin.flush()
        written = read_back(kafka_bootstrap, topic, 4)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert [r.value for r in written] == [b"a", b"", b"c", b"d"]
    assert proc.returncode == 130, err
    assert b"Traceback" not in err
    assert (
        f"interrupted after 4 record(s) were sent to {topic} (acknowledged: input lines 1-4); "
        f"the next input line is 5: resume with tail -n +5 INPUT | sharecon produce {topic}"
    ).encode() in err


def test_consume_into_a_pipe_accepts_only_the_lines_its_reader_read(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """`consume | head -1`: lines written into the pipe but never read when the reader
    leaves are released, not accepted (they were, 6 of 7 in the probe). The reader here
    takes exactly one 4-byte line, waits for the rest to sit in the pipe, and leaves;
    the 99 others come back, their delivery count spent once."""
    topic = topic_factory(1)
    b = ("-b", kafka_bootstrap)
    assert (
        cli("produce", topic, *b, input="".join(f"r{i:02d}\n" for i in range(100))).returncode == 0
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARECON_")}
    proc = subprocess.Popen(
        [*CLI, "consume", topic, "-g", share_group, "--value-only", *b],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        first = os.read(fd, 4)  # exactly one line, as head -1 shows one
        time.sleep(2)  # the other 99 lines are written into the pipe meanwhile
        proc.stdout.close()
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert first == b"r00\n"
    assert proc.returncode == 0 and b"Traceback" not in err, err
    rest = cli("consume", topic, "-g", share_group, "--max", "99", "--idle", "5", "--json", *b)
    assert rest.returncode == 0, rest.stderr
    got = json_lines(rest.stdout)
    assert sorted(int(str(r["offset"])) for r in got) == list(range(1, 100))
    # Those written into the pipe were delivered once already: the release spent it.
    assert {r["delivery_count"] for r in got} <= {1, 2}
    assert any(r["delivery_count"] == 2 for r in got)
