"""Users' code type-checks under ``mypy --strict``: deserializers type the records,
serializers type what ``send`` takes, and the defaults stay bytes."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]

USER_CODE = """
from __future__ import annotations

import pathlib
from typing import Any

from typing_extensions import assert_type

from sharecon import Producer, ProducerRecord, Record, RecordedAcks, ShareConsumer
from sharecon.config import ConnectionConfig, TlsConfig, from_properties
from sharecon.serde import json_deserializer, json_serializer, string_deserializer


async def from_files() -> None:
    props = from_properties("client.properties")
    async with Producer(**props) as untyped:  # accepted; its record types are Any
        await untyped.send_and_wait("t", b"v")
    async with Producer(props.bootstrap, config=props.config) as producer:
        await producer.send("t", b"v", key="typed as Producer(bootstrap) is")
    tls = TlsConfig(ca_file=pathlib.Path("ca.pem"), cert_file="c.crt", key_file="c.key")
    config = ConnectionConfig(tls=tls)
    async with ShareConsumer(props.bootstrap, group_id="g", topics=["t"], config=config) as c:
        assert_type(c, ShareConsumer[bytes, bytes])


async def plain(bootstrap: str) -> None:
    async with ShareConsumer(bootstrap, group_id="g", topics=["t"]) as consumer:
        async for record in consumer:
            assert_type(record, Record[bytes, bytes])
            assert_type(record.value, bytes | None)
        for rec in await consumer.poll(1.0):
            assert_type(rec.key, bytes | None)


async def typed(bootstrap: str) -> None:
    consumer = ShareConsumer(
        bootstrap,
        group_id="g",
        topics=["t"],
        key_deserializer=string_deserializer(),
        value_deserializer=lambda data: int(data),
    )
    assert_type(consumer, ShareConsumer[str, int])
    async with consumer:
        async for record in consumer:
            assert_type(record.key, str | None)
            assert_type(record.value, int | None)
            assert_type(record.serialized_value, bytes | None)

        async def handle(record: Record[str, int]) -> None:
            record.accept()

        await consumer.process(handle)
        async for batch in consumer.batches():
            assert_type(batch, list[Record[str, int]])


async def producing(bootstrap: str) -> None:
    async with Producer(bootstrap) as raw:
        await raw.send("t", b"bytes", key="text is fine")
        await raw.send_batch([ProducerRecord("t", b"v"), ProducerRecord("t", "s")])
    async with Producer(bootstrap, value_serializer=json_serializer()) as producer:
        await producer.send("t", {"any": ["json"]})
    def ints(n: int) -> bytes:
        return str(n).encode()
    async with Producer(bootstrap, value_serializer=ints) as counting:
        await counting.send("t", 7)
        await counting.send("t", None)


def built() -> None:
    acks = RecordedAcks()
    record = Record.build("t", {"id": 1}, key="k", acks=acks)
    assert_type(record, Record[str, dict[str, int]])
    record.accept()
    plain_record = Record.build("t", b"v")
    assert_type(plain_record, Record[bytes, bytes])
"""

BAD_CODE = """
from sharecon import Producer, ShareConsumer

async def wrong(bootstrap: str) -> None:
    def ints(n: int) -> bytes:
        return str(n).encode()
    async with Producer(bootstrap, value_serializer=ints) as producer:
        await producer.send("t", "not an int")
    async with ShareConsumer(bootstrap, group_id="g", topics=["t"]) as consumer:
        async for record in consumer:
            record.value.upper(1)
"""


def _mypy(tmp_path: pathlib.Path, code: str) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "user_code.py"
    src.write_text(textwrap.dedent(code))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--python-version",
            "3.10",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-incremental",
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
        env=env,
    )


def test_user_code_with_and_without_serializers_type_checks(tmp_path: pathlib.Path) -> None:
    proc = _mypy(tmp_path, USER_CODE)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mistyped_user_code_is_caught(tmp_path: pathlib.Path) -> None:
    proc = _mypy(tmp_path, BAD_CODE)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert 'Argument 2 to "send" of "Producer" has incompatible type "str"' in proc.stdout
    assert 'Item "None" of "bytes | None" has no attribute "upper"' in proc.stdout
