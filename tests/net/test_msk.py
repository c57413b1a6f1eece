"""AWS MSK IAM tokens from AWS's own signer, without AWS.

Static fake credentials come from the environment; every socket is refused during the
tests, which proves the signer works locally (no STS, no instance metadata). What is
checked: the token's shape (a base64url presigned ``kafka-cluster:Connect`` URL with its
SigV4 query parameters), its expiry, its refresh, and the missing-extra error.
"""

from __future__ import annotations

import base64
import socket
import sys
import time
import urllib.parse
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from sharecon import errors
from sharecon._net.connect import fetch_token
from sharecon.config import SaslConfig, msk_iam_token_provider

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.anyio

ACCESS_KEY = "AKIAIOSFODNN7EXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SESSION_TOKEN = "FwoGZXIvYXdzEXAMPLEsessiontoken"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def fake_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[list[object]]:
    """Credentials from the environment only, and no network at all."""
    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> Any:
        attempts.append(args)
        raise OSError("network use is forbidden in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    yield attempts
    assert attempts == [], "the signer tried to reach the network"


def decode(token: str) -> urllib.parse.SplitResult:
    assert "=" not in token and "+" not in token and "/" not in token  # base64url, unpadded
    url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    return urllib.parse.urlsplit(url)


async def test_token_is_a_presigned_connect_url() -> None:
    provider = msk_iam_token_provider("eu-west-1")
    before = time.time()
    token = await fetch_token(provider)
    url = decode(token.value)
    assert (url.scheme, url.hostname, url.path) == ("https", "kafka.eu-west-1.amazonaws.com", "/")
    query = dict(urllib.parse.parse_qsl(url.query))
    assert query["Action"] == "kafka-cluster:Connect"
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    credential = query["X-Amz-Credential"].split("/")
    assert credential[0] == ACCESS_KEY and credential[2:] == [
        "eu-west-1",
        "kafka-cluster",
        "aws4_request",
    ]
    assert query["X-Amz-Expires"] == "900"
    assert query["X-Amz-SignedHeaders"] == "host"
    assert query["X-Amz-Security-Token"] == SESSION_TOKEN
    assert len(query["X-Amz-Signature"]) == 64 and int(query["X-Amz-Signature"], 16) >= 0
    assert query["User-Agent"].startswith("aws-msk-iam-sasl-signer-python/")
    # 15 minutes from the signing time (whole seconds).
    assert before + 898 <= token.expires_at <= time.time() + 900
    assert SECRET_KEY not in url.geturl()
    for text in (
        repr(token),
        repr(provider),
        repr(SaslConfig("OAUTHBEARER", token_provider=provider)),
    ):
        assert token.value not in text and SECRET_KEY not in text and SESSION_TOKEN not in text


async def test_token_is_kept_then_refreshed_near_80_percent() -> None:
    provider = msk_iam_token_provider("us-east-1")
    first = await provider()
    assert await provider() is first and provider.fetches == 1
    start = time.time()
    provider._clock = lambda: start + 0.75 * 900  # before the refresh point
    assert await provider() is first
    await anyio.sleep(1.01)  # a new signing second, so the signature differs
    provider._clock = lambda: start + 0.85 * 900
    second = await provider()
    assert provider.fetches == 2 and second.value != first.value
    assert (
        dict(urllib.parse.parse_qsl(decode(second.value).query))["X-Amz-Date"]
        > dict(urllib.parse.parse_qsl(decode(first.value).query))["X-Amz-Date"]
    )


async def test_missing_credentials_are_a_token_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    with pytest.raises(errors.OAuthTokenError, match="could not sign"):
        await msk_iam_token_provider("eu-west-1")()


def test_missing_extra_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        sys.modules, "aws_msk_iam_sasl_signer.MSKAuthTokenProvider", None
    )  # import fails
    with pytest.raises(errors.ConfigError, match=r"pip install 'sharecon\[aws\]'"):
        msk_iam_token_provider("eu-west-1")


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("",), "region"),
        (("eu west",), "region"),
        (("eu-west-1",), None),
    ],
)
def test_region_is_checked(args: tuple[str], match: str | None) -> None:
    if match is None:
        assert msk_iam_token_provider(*args).region == args[0]
        return
    with pytest.raises(errors.ConfigError, match=match):
        msk_iam_token_provider(*args)


def test_profile_and_role_are_exclusive() -> None:
    with pytest.raises(errors.ConfigError, match="not both"):
        msk_iam_token_provider("eu-west-1", profile="p", role_arn="arn:aws:iam::1:role/r")
