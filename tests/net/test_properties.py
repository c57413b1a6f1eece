"""sharecon.config.from_properties: Kafka client.properties files as providers hand them out.

The files are written here in the shape of Confluent Cloud's and Amazon MSK's published
client examples (with made-up hosts and credentials); nothing connects. Real-broker runs
of ``--command-config`` are in tests/broker/test_mtls.py (mTLS) and
tests/broker/test_security.py (SASL_SSL).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from sharecon import errors
from sharecon._net.properties import _oauthbearer, parse_jaas, read_properties
from sharecon.config import (
    ClientProperties,
    MskIamTokenProvider,
    OidcTokenProvider,
    SaslConfig,
    from_properties,
)
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer
from tests.net.test_tls_config import PASSWORD, pki  # noqa: F401 - the certificates fixture

if TYPE_CHECKING:
    from pathlib import Path

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return path


# -- provider-shaped files -------------------------------------------------------------------


def test_confluent_cloud_api_key_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(
        tmp_path,
        "# Required connection configs for Kafka producer, consumer, and admin\n"
        "bootstrap.servers=pkc-00000.eu-west-1.aws.confluent.cloud:9092\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=PLAIN\n"
        f"sasl.jaas.config={PLAIN} required username='ABCDEFGH12345678' "
        "password='cflt/s3cr3t+Value==';\n"
        "\n"
        "# Required for correctness in Apache Kafka clients prior to 2.6\n"
        "client.dns.lookup=use_all_dns_ips\n"
        "# Best practice for higher availability in Apache Kafka clients prior to 3.0\n"
        "session.timeout.ms=45000\n"
        "# Best practice for Kafka producer to prevent data loss\n"
        "acks=all\n"
        "basic.auth.user.info=SR_KEY:sr-s3cr3t\n",
    )
    with caplog.at_level(logging.WARNING, logger="sharecon._net.properties"):
        props = from_properties(path)
    assert props.bootstrap == "pkc-00000.eu-west-1.aws.confluent.cloud:9092"
    assert props.config.sasl == SaslConfig("PLAIN", "ABCDEFGH12345678", "cflt/s3cr3t+Value==")
    tls = props.config.tls
    assert tls is not None and tls.ca_file is None and tls.check_hostname  # system CAs
    # One WARNING naming the keys sharecon does not use, never their values.
    (warning,) = caplog.records
    for key in ("acks", "basic.auth.user.info", "client.dns.lookup", "session.timeout.ms"):
        assert key in warning.getMessage()
    assert "sr-s3cr3t" not in caplog.text and "cflt/s3cr3t" not in caplog.text


def test_confluent_cloud_oauth_file_gives_an_oidc_provider(
    tmp_path: Path,
) -> None:
    text = (
        "bootstrap.servers=pkc-00000.us-east-1.aws.confluent.cloud:9092\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=OAUTHBEARER\n"
        "sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer."
        "OAuthBearerLoginCallbackHandler\n"
        "sasl.oauthbearer.token.endpoint.url=https://idp.example.com/oauth2/token\n"
        f"sasl.jaas.config={OAUTH} required \\\n"
        "    clientId='client-1' \\\n"
        "    clientSecret='oauth-s3cr3t' \\\n"
        "    scope='kafka' \\\n"
        "    extension_logicalCluster='lkc-00000' \\\n"
        "    extension_identityPoolId='pool-0000';\n"
    )
    raw = read_properties(write(tmp_path, text))
    settings = _oauthbearer(raw)
    assert settings.token_endpoint_url == "https://idp.example.com/oauth2/token"
    assert (settings.client_id, settings.client_secret, settings.scope) == (
        "client-1",
        "oauth-s3cr3t",
        "kafka",
    )
    assert settings.extensions == {"logicalCluster": "lkc-00000", "identityPoolId": "pool-0000"}
    assert "oauth-s3cr3t" not in repr(settings)
    props = from_properties(tmp_path / "client.properties")
    assert props.oauthbearer == settings
    assert props.config.sasl is not None and props.config.sasl.mechanism == "OAUTHBEARER"
    provider = props.config.sasl.token_provider
    assert isinstance(provider, OidcTokenProvider)
    assert (provider.client_id, provider.scope) == ("client-1", "kafka")
    assert dict(provider.extensions) == settings.extensions
    assert "oauth-s3cr3t" not in repr(props)
    # Without the secret, the error names what is missing and nothing else.
    (tmp_path / "client.properties").write_text(text.replace("clientSecret='oauth-s3cr3t'", ""))
    with pytest.raises(errors.ConfigError, match="client id and secret"):
        from_properties(tmp_path / "client.properties")


def test_oauthbearer_keys_win_over_jaas_options() -> None:
    settings = _oauthbearer(
        {
            "sasl.oauthbearer.client.credentials.client.id": "from-key",
            "sasl.oauthbearer.client.credentials.client.secret": "key-secret",
            "sasl.oauthbearer.scope": "a b",
            "sasl.jaas.config": f'{OAUTH} required clientId="from-jaas";',
        }
    )
    assert (settings.client_id, settings.client_secret, settings.scope) == (
        "from-key",
        "key-secret",
        "a b",
    )


def test_msk_scram_file_with_a_jks_truststore_says_how_to_convert(tmp_path: Path) -> None:
    jks = tmp_path / "kafka.client.truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02")  # a JKS header, not PEM
    text = (
        "bootstrap.servers=b-1.demo.abc123.c2.kafka.us-east-1.amazonaws.com:9096,"
        "b-2.demo.abc123.c2.kafka.us-east-1.amazonaws.com:9096\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        f'sasl.jaas.config={SCRAM} required username="alice" password="msk-s3cr3t";\n'
        f"ssl.truststore.location={jks}\n"
        "ssl.truststore.password=changeit\n"
    )
    with pytest.raises(errors.ConfigError, match="JKS") as info:
        from_properties(write(tmp_path, text))
    assert "keytool -importkeystore" in str(info.value) and "ssl.truststore.type=PEM" in str(
        info.value
    )
    assert "msk-s3cr3t" not in str(info.value) and "changeit" not in str(info.value)
    # MSK's certificates are signed by a public CA: without a truststore it just works.
    props = from_properties(write(tmp_path, text.rsplit("ssl.truststore.location", 1)[0]))
    assert props.bootstrap.count(",") == 1
    assert props.config.sasl == SaslConfig("SCRAM-SHA-512", "alice", "msk-s3cr3t")


def test_msk_iam_files_are_refused_clearly(tmp_path: Path) -> None:
    iam = (
        "bootstrap.servers=b-1.demo.abc123.c2.kafka.us-east-1.amazonaws.com:9098\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=AWS_MSK_IAM\n"
        "sasl.jaas.config=software.amazon.msk.auth.iam.IAMLoginModule required;\n"
        "sasl.client.callback.handler.class=software.amazon.msk.auth.iam."
        "IAMClientCallbackHandler\n"
    )
    with pytest.raises(errors.ConfigError, match="AWS_MSK_IAM is not supported"):
        from_properties(write(tmp_path, iam))
    oauth = iam.replace("AWS_MSK_IAM", "OAUTHBEARER").replace(
        "software.amazon.msk.auth.iam.IAMLoginModule", OAUTH
    ) + (
        "sasl.login.callback.handler.class=software.amazon.msk.auth.iam."
        "IAMOAuthBearerLoginCallbackHandler\n"
    )
    settings = _oauthbearer(read_properties(write(tmp_path, oauth)))
    assert settings.login_callback_handler is not None
    assert settings.login_callback_handler.endswith("IAMOAuthBearerLoginCallbackHandler")
    # MSK IAM tokens (AWS's signer, the aws extra), for the region in bootstrap.servers.
    props = from_properties(tmp_path / "client.properties")
    assert props.config.sasl is not None
    provider = props.config.sasl.token_provider
    assert isinstance(provider, MskIamTokenProvider)
    assert provider.region == "us-east-1"


def test_msk_mtls_file_with_jks_keystore_is_refused(tmp_path: Path) -> None:
    text = (
        "bootstrap.servers=b-1.demo.abc123.c2.kafka.us-east-1.amazonaws.com:9094\n"
        "security.protocol=SSL\n"
        f"ssl.keystore.location={tmp_path / 'kafka.client.keystore.jks'}\n"
        "ssl.keystore.password=store-pw\n"
        "ssl.key.password=key-pw\n"
    )
    with pytest.raises(errors.ConfigError, match=r"ssl\.keystore\.location .* JKS") as info:
        from_properties(write(tmp_path, text))
    assert "key-pw" not in str(info.value) and "store-pw" not in str(info.value)


# -- TLS stores -------------------------------------------------------------------------------


def test_pem_stores_as_files(pki: Path, tmp_path: Path) -> None:  # noqa: F811
    keystore = tmp_path / "keystore.pem"
    keystore.write_text((pki / "bob.key").read_text() + (pki / "bob.crt").read_text())
    props = from_properties(
        {
            "bootstrap.servers": "127.0.0.1:9093",
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki / "ca.pem"),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.key.password": PASSWORD,
            "client.id": "billing",
        }
    )
    tls = props.config.tls
    assert tls is not None and tls.mutual
    assert (tls.ca_file, tls.cert_file, props.config.client_id) == (
        str(pki / "ca.pem"),
        str(keystore),
        "billing",
    )
    assert PASSWORD not in repr(props)


def test_pem_stores_inline_and_a_wrong_key_password(pki: Path) -> None:  # noqa: F811
    base = {
        "bootstrap.servers": "127.0.0.1:9093",
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": (pki / "ca.pem").read_text(),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": (pki / "bob.key").read_text(),
        "ssl.keystore.certificate.chain": (pki / "bob.crt").read_text(),
        "ssl.key.password": PASSWORD,
    }
    tls = from_properties(base).config.tls
    assert tls is not None and tls.mutual and tls.ca_pem is not None
    with pytest.raises(errors.ConfigError, match="wrong key_password") as info:
        from_properties({**base, "ssl.key.password": "nope-pw"})
    assert "nope-pw" not in str(info.value) and "PRIVATE KEY" not in str(info.value)


def test_pkcs12_without_cryptography_is_refused_with_the_way_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if the optional package were absent (a None entry makes its import fail).
    monkeypatch.setitem(sys.modules, "cryptography", None)
    store = tmp_path / "client.p12"
    store.write_bytes(b"0\x82")
    with pytest.raises(errors.ConfigError, match="needs the 'cryptography' package") as info:
        from_properties(
            {
                "bootstrap.servers": "127.0.0.1:9093",
                "security.protocol": "SSL",
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": str(store),
                "ssl.keystore.password": "p12-pw",
            }
        )
    assert "openssl pkcs12" in str(info.value) and "p12-pw" not in str(info.value)


def test_empty_endpoint_identification_turns_hostname_checks_off_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        props = from_properties(
            {
                "bootstrap.servers": "127.0.0.1:9093",
                "security.protocol": "SSL",
                "ssl.endpoint.identification.algorithm": "",
            }
        )
    assert props.config.tls is not None and not props.config.tls.check_hostname
    assert "hostname verification is off" in caplog.text


# -- checks -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("props", "says"),
    [
        ({}, "bootstrap.servers is missing"),
        ({"bootstrap.servers": "h:1", "security.protocol": "TLS"}, "security.protocol=TLS"),
        ({"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL"}, "GSSAPI"),
        (
            {
                "bootstrap.servers": "h:1",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.jaas.config": f'{PLAIN} required username="u" password="pw-9";',
            },
            "does not do SCRAM-SHA-256",
        ),
        (
            {
                "bootstrap.servers": "h:1",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": f'{PLAIN} required username="u";',
            },
            "no password option",
        ),
        (
            {
                "bootstrap.servers": "h:1",
                "security.protocol": "SSL",
                "ssl.endpoint.identification.algorithm": "ldap",
            },
            "expected https or empty",
        ),
    ],
)
def test_wrong_properties_name_the_key(props: dict[str, str], says: str) -> None:
    with pytest.raises(errors.ConfigError, match=says) as info:
        from_properties(props)
    assert "pw-9" not in str(info.value)


def test_plaintext_and_librdkafka_style_credentials() -> None:
    props = from_properties({"bootstrap.servers": "127.0.0.1:9092"})
    assert props.config.tls is None and props.config.sasl is None
    props = from_properties(
        {
            "bootstrap.servers": "127.0.0.1:9092",
            "security.protocol": "sasl_plaintext",
            "sasl.mechanisms": "SCRAM-SHA-256",
            "sasl.username": "bob",
            "sasl.password": "pw",
        },
        bootstrap="127.0.0.1:19092",
    )
    assert props.bootstrap == "127.0.0.1:19092"
    assert props.config.sasl == SaslConfig("SCRAM-SHA-256", "bob", "pw")


def test_unpacks_as_the_clients_keyword_arguments() -> None:
    props = from_properties({"bootstrap.servers": "127.0.0.1:9092", "client.id": "etl"})
    assert isinstance(props, ClientProperties) and dict(**props) == {
        "bootstrap": "127.0.0.1:9092",
        "config": props.config,
    }
    producer = Producer(**props)
    consumer = ShareConsumer(**props, group_id="g", topics=["t"])
    assert producer._config is props.config and consumer._connection is props.config
    with pytest.raises(errors.ConfigError, match="client_id"):
        ShareConsumer(**props, group_id="g", topics=["t"], client_id="another")


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(errors.ConfigError, match="nope.properties"):
        from_properties(tmp_path / "nope.properties")


# -- the formats ---------------------------------------------------------------------------------


def test_properties_syntax(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "# comment\n"
        "! another comment\n"
        "   spaced.key   =   value with spaces  \n"
        "colon.key: v1\n"
        "space.key v2\n"
        "continued=one,\\\n"
        "          two\n"
        "escaped\\=key=a\\tb\\u00e9\n"
        "empty=\n"
        "double.backslash=c:\\\\dir\\\\\n"
        "last.key=x",
    )
    assert read_properties(path) == {
        "spaced.key": "value with spaces  ",
        "colon.key": "v1",
        "space.key": "v2",
        "continued": "one,two",
        "escaped=key": "a\tb\u00e9",
        "empty": "",
        "double.backslash": "c:\\dir\\",
        "last.key": "x",
    }


@pytest.mark.parametrize(
    ("text", "module", "options"),
    [
        (f'{PLAIN} required username="alice" password="a-secret";', PLAIN, {"username": "alice", "password": "a-secret"}),
        (f"{PLAIN} required username='alice' password='it''s';", None, None),
        (f"{PLAIN}   REQUIRED\n  username=alice\n  password=\"p;w=x\" ;  ", PLAIN, {"username": "alice", "password": "p;w=x"}),
        (f'{PLAIN} required username="a\\"b" password="back\\\\slash\\n";', PLAIN, {"username": 'a"b', "password": "back\\slash\n"}),
        (f"{PLAIN} required /* old: user=bob */ username='x' // note\n password='y';", PLAIN, {"username": "x", "password": "y"}),
        (f"{SCRAM} required;", SCRAM, {}),
        (f"{SCRAM} optional username=\"u\" password='He said \"hi\"';", SCRAM, {"username": "u", "password": 'He said "hi"'}),
    ],
)  # fmt: skip
def test_jaas_syntax(text: str, module: str | None, options: dict[str, str] | None) -> None:
    if module is None:  # 'it''s' is two quoted words in a row: not an option value
        with pytest.raises(errors.ConfigError):
            parse_jaas(text)
        return
    assert parse_jaas(text) == (module, options)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (f'{PLAIN} required username="alice" password="s3cr3t-x"', "must end with ';'"),
        (f'{PLAIN} username="alice" password="s3cr3t-x";', "control flag"),
        (f'{PLAIN} required username="alice" password="s3cr3t-x;', "unclosed quote"),
        (f'{PLAIN} required username password="s3cr3t-x";', "option 1 is malformed"),
        (f'{PLAIN} required password="s3cr3t-x"; {SCRAM} required;', "only one login module"),
        ("", "expected 'LoginModuleClass required"),
    ],
)
def test_malformed_jaas_is_named_without_its_text(text: str, says: str) -> None:
    with pytest.raises(errors.ConfigError, match=says) as info:
        parse_jaas(text)
    assert "s3cr3t-x" not in str(info.value)


def test_pkcs12_stores_are_read_with_cryptography(pki: Path, tmp_path: Path) -> None:  # noqa: F811
    """openssl-made PKCS12 files (a key store with bob's key, a trust store with the CA)."""
    keystore, truststore = tmp_path / "client.p12", tmp_path / "trust.p12"
    env = {"IN_PW": PASSWORD, "OUT_PW": "p12-store-pw"}
    subprocess.run(
        ["openssl", "pkcs12", "-export", "-in", str(pki / "bob.crt"), "-inkey", str(pki / "bob.key"),
         "-passin", "env:IN_PW", "-passout", "env:OUT_PW", "-out", str(keystore)],
        check=True, capture_output=True, timeout=60, env={**os.environ, **env},
    )  # fmt: skip
    subprocess.run(
        ["openssl", "pkcs12", "-export", "-nokeys", "-in", str(pki / "ca.pem"),
         "-passout", "env:OUT_PW", "-out", str(truststore)],
        check=True, capture_output=True, timeout=60, env={**os.environ, **env},
    )  # fmt: skip
    base = {
        "bootstrap.servers": "127.0.0.1:9093",
        "security.protocol": "SSL",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(keystore),
        "ssl.keystore.password": "p12-store-pw",
        "ssl.truststore.location": str(truststore),  # type inferred from the .p12 name
        "ssl.truststore.password": "p12-store-pw",
    }
    tls = from_properties(base).config.tls
    assert tls is not None and tls.mutual
    assert tls.cert_pem is not None and tls.ca_pem is not None
    assert tls.cert_pem.strip() == (pki / "bob.crt").read_text().strip()
    assert "BEGIN CERTIFICATE" in tls.ca_pem
    assert "p12-store-pw" not in repr(tls) and "PRIVATE KEY" not in repr(tls)
    with pytest.raises(errors.ConfigError, match="wrong ssl.keystore.password") as info:
        from_properties({**base, "ssl.keystore.password": "nope-p12"})
    assert "nope-p12" not in str(info.value)
