"""SASL mechanisms against published test vectors; credentials never leak into reprs/errors."""

from __future__ import annotations

import pytest

from sharecon import errors
from sharecon._net.sasl import SaslConfig, ScramMechanism

# RFC 7677 section 3: SCRAM-SHA-256 example exchange (user "user", password "pencil").
RFC7677_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC7677_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_scram_sha256_rfc7677_vector() -> None:
    mech = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677_NONCE)
    assert mech.step(None) == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert mech.step(RFC7677_SERVER_FIRST) == RFC7677_CLIENT_FINAL
    assert not mech.done
    assert mech.step(RFC7677_SERVER_FINAL) == b""
    assert mech.done


def test_scram_rejects_forged_server_signature() -> None:
    mech = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677_NONCE)
    mech.step(None)
    mech.step(RFC7677_SERVER_FIRST)
    with pytest.raises(errors.SaslAuthenticationFailedError, match="signature"):
        mech.step(b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")


def test_scram_rejects_nonce_not_extending_ours() -> None:
    mech = ScramMechanism("SCRAM-SHA-512", "user", "pencil", nonce="abc")
    mech.step(None)
    with pytest.raises(errors.SaslAuthenticationFailedError, match="nonce"):
        mech.step(b"r=zzz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")


@pytest.mark.parametrize(
    "server_first",
    [b"e=unknown-user", b"r=abcX,s=!!!,i=4096", b"r=abcX,s=W22Z,i=0", b"\xff\xfe", b"garbage"],
)
def test_scram_bad_server_first_is_typed_error(server_first: bytes) -> None:
    mech = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce="abc")
    mech.step(None)
    with pytest.raises(errors.SaslAuthenticationFailedError):
        mech.step(server_first)


def test_scram_escapes_username() -> None:
    mech = ScramMechanism("SCRAM-SHA-256", "a,b=c", "pw", nonce="n")
    assert mech.step(None) == b"n,,n=a=2Cb=3Dc,r=n"


def test_plain_message() -> None:
    mech = SaslConfig("PLAIN", "alice", "s3cret")._new_mechanism()
    assert mech.step(None) == b"\0alice\0s3cret"
    assert mech.done


def test_password_never_in_repr() -> None:
    cfg = SaslConfig("SCRAM-SHA-512", "alice", "s3cret-pw")
    assert "s3cret" not in repr(cfg)
    assert "s3cret" not in repr(cfg._new_mechanism())


def test_bad_mechanism_is_config_error() -> None:
    with pytest.raises(errors.ConfigError, match="GSSAPI"):
        SaslConfig("GSSAPI", "alice", "pw")


@pytest.mark.parametrize("iterations", [16385, 1_000_000])
def test_scram_refuses_more_iterations_than_kafka_allows(iterations: int) -> None:
    """Each PBKDF2 round runs on the event loop: a server asking for too many is refused."""
    mech = ScramMechanism("SCRAM-SHA-512", "user", "pencil", nonce="abc")
    mech.step(None)
    with pytest.raises(errors.SaslAuthenticationFailedError, match=str(iterations)):
        mech.step(f"r=abcX,s=W22ZaJ0SNY7soEsUEjb6gQ==,i={iterations}".encode())


@pytest.mark.parametrize("iterations", [4095, 1, 0, -5])
def test_scram_refuses_fewer_iterations_than_rfc_7677_requires(iterations: int) -> None:
    """RFC 7677 (and Kafka) require at least 4096: a server asking for fewer would make the
    exchange cheap to attack offline; the client refuses before computing any proof."""
    mech = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce="abc")
    mech.step(None)
    with pytest.raises(errors.SaslAuthenticationFailedError, match=r"fewer than 4096") as info:
        mech.step(f"r=abcX,s=W22ZaJ0SNY7soEsUEjb6gQ==,i={iterations}".encode())
    assert f"asks for {iterations} iterations" in str(info.value)
    assert "pencil" not in str(info.value)


def test_scram_accepts_rfc_7677s_minimum_iterations() -> None:
    mech = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce="abc")
    mech.step(None)
    assert mech.step(b"r=abcX,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096").startswith(b"c=biws,r=abcX,p=")


def test_scram_accepts_kafkas_maximum_iterations() -> None:
    mech = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce="abc")
    mech.step(None)
    assert mech.step(b"r=abcX,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=16384").startswith(b"c=biws,r=abcX,p=")
