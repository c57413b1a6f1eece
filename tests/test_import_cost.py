"""``from sharecon import ShareConsumer`` imports the consumer and what it needs, no more.

Importing is part of a client's start (and of every short-lived process that consumes):
each message class the protocol generates is a dataclass whose methods the dataclass
machinery compiles with ``exec`` at import. So the package root, ``sharecon.protocol`` and
``sharecon.protocol.messages`` import what a name needs when the name is first asked for
(docs/performance.md, "The import counts too"). These tests pin that in behaviour terms
(which modules a fresh interpreter has loaded), never in timings, and check that the lazy
names are the same objects the modules define.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import sharecon
from sharecon.protocol import messages
from sharecon.protocol.messages import REQUESTS, RESPONSES, ApiKey

#: What a share consumer never needs to import: the other clients and their engines, the
#: command line and the other front ends, the test kit, the credential providers that
#: only settings objects build (``sharecon.config``), the message modules of the APIs
#: only the producer and the admin client speak, and those the consumer sends only on
#: request or with settings that are off by default.
NOT_FOR_THE_CONSUMER = (
    "sharecon.admin",
    "sharecon._admin",
    "sharecon.producer",
    "sharecon._producer",
    "sharecon._produce",
    "sharecon.cli",
    "sharecon.worker",
    "sharecon.sync",
    "sharecon.testing",
    "sharecon.exporter",
    "sharecon.faststream",
    "sharecon.otel",
    "sharecon.prometheus",
    "sharecon.config",
    "sharecon._net.oauth",
    "sharecon._net.msk",
    "sharecon._net.properties",
    "sharecon._net.sasl_gssapi",
    *(
        f"sharecon.protocol.messages.{module}"
        for module in (
            "alter_share_group_offsets",
            "create_topics",
            "delete_groups",
            "delete_share_group_offsets",
            "delete_topics",
            "describe_configs",  # asked only with keep_locks or lock_duration()
            "describe_share_group_offsets",  # asked only while partition_metrics() is read
            "fetch",
            "incremental_alter_configs",
            "init_producer_id",
            "list_groups",
            "list_offsets",
            "produce",
            "sasl_authenticate",  # only where SASL is configured
            "sasl_handshake",
            "share_group_describe",
        )
    ),
)


def loaded_after(statement: str) -> list[str]:
    """The sharecon modules a fresh interpreter has loaded after running ``statement``."""
    code = (
        f"import sys\n{statement}\n"
        "import json\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'sharecon')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_importing_the_consumer_leaves_the_other_clients_and_apis_out() -> None:
    loaded = loaded_after("from sharecon import ShareConsumer")
    assert "sharecon.consumer" in loaded
    assert "sharecon.protocol.messages.share_fetch" in loaded  # the test can see imports
    extra = [m for m in loaded if any(_under(m, p) for p in NOT_FOR_THE_CONSUMER)]
    assert not extra, f"from sharecon import ShareConsumer imported {extra}"


#: Libraries the consumer loads on first use only: asyncio (loaded by an asyncio program
#: anyway, never needed by a trio one), importlib.metadata and argparse (which came with the
#: crc32c package's __init__, tests/protocol/test_crc.py), the codec libraries (a topic's
#: first batch in that codec), tempfile (TLS keys given as PEM text).
LIBRARIES_NOT_AT_IMPORT = (
    "asyncio",
    "importlib.metadata",
    "argparse",
    "lz4",
    "snappy",
    "zstandard",
    "cramjam",
    "tempfile",
)


def test_importing_the_consumer_leaves_libraries_for_rare_paths_out() -> None:
    code = (
        "import sys\nbefore = set(sys.modules)\nfrom sharecon import ShareConsumer\n"
        "added = set(sys.modules) - before\n"
        f"print([m for m in {LIBRARIES_NOT_AT_IMPORT!r} if m in added])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"


def test_importing_the_package_imports_no_client() -> None:
    loaded = loaded_after("import sharecon")
    clients = ("sharecon.consumer", "sharecon.admin", "sharecon.producer", "sharecon.dlq")
    assert not [m for m in loaded if any(_under(m, c) for c in clients)], loaded
    assert not [m for m in loaded if m.startswith("sharecon.protocol.messages.")], loaded


def test_the_admin_client_still_gets_its_messages() -> None:
    loaded = loaded_after("from sharecon import Admin")
    assert "sharecon.admin" in loaded
    assert "sharecon.protocol.messages.create_topics" in loaded


@pytest.mark.parametrize("name", sorted(sharecon.__all__))
def test_every_public_name_resolves_to_its_definition(name: str) -> None:
    value = getattr(sharecon, name)
    assert name in dir(sharecon)
    home = sharecon._HOME.get(name)
    if home is not None:
        module = sys.modules[home]
        assert value is getattr(module, name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        sharecon.no_such_name  # noqa: B018
    with pytest.raises(ImportError):
        from sharecon.protocol.messages import NoSuchRequest  # noqa: F401
    with pytest.raises(ImportError):
        from sharecon.protocol import NoSuchResponse  # noqa: F401


def test_the_registry_loads_each_api_by_key() -> None:
    assert sorted(REQUESTS) == sorted(RESPONSES) == sorted(int(k) for k in ApiKey)
    assert len(REQUESTS) == len(ApiKey)
    for key in ApiKey:
        request, response = REQUESTS[key], RESPONSES[key]
        assert request.api_key == response.api_key == key
        assert request.response_type is response
        assert key in REQUESTS
        assert REQUESTS.get(key) is request
        module = getattr(messages, key.name.lower())
        assert request is getattr(module, f"{request.api_name}Request")
        assert getattr(messages, f"{request.api_name}Request") is request
    assert 9999 not in REQUESTS
    assert REQUESTS.get(9999) is None
    assert RESPONSES.get(9999, "none") == "none"
    with pytest.raises(KeyError):
        REQUESTS[9999]
    assert dict(REQUESTS.items())[ApiKey.SHARE_FETCH].api_name == "ShareFetch"
