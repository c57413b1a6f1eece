"""PEM text as Kafka's clients read it: armour and base64 found anywhere, in any layout.

Kafka's ``DefaultSslEngineFactory`` finds each ``-----BEGIN <label>-----`` ...
``-----END <label>-----`` entry with a pattern that allows any whitespace (spaces, tabs,
newlines) between the armour lines and the base64 and within the base64. That is what
makes ``ssl.truststore.certificates=-----BEGIN CERTIFICATE----- \\`` with the base64 on
continuation lines work in a properties file: a continuation joins the lines without a
newline, so the value is one line with spaces where the line breaks were. OpenSSL (and so
Python's :mod:`ssl`) wants one armour line each and no spaces, so the entries are found
here and written back in the canonical layout.

Differences from Kafka, on purpose: every entry is read (Kafka's greedy pattern keeps only
the last of several entries written on one line), and the label is kept (Kafka reads only
PKCS#8 keys; OpenSSL also reads ``RSA PRIVATE KEY`` and ``EC PRIVATE KEY``).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field

from sharecon import errors

__all__ = ["PemEntry", "canonical_pem", "pem_entries"]

# Java's \s: what Kafka's pattern allows between and inside the parts.
_WS = "[ \t\n\x0b\f\r]"
_ENTRY = re.compile(
    rf"-+BEGIN{_WS}*(?P<label>[^-]*?)-+{_WS}+"
    # RFC 1421 headers ("Proc-Type: 4,ENCRYPTED", "DEK-Info: ..."), one a line.
    rf"(?P<headers>(?:{_WS}*[^\r\n:]*:[^\r\n]*[\r\n]+)*)"
    rf"(?P<body>[A-Za-z0-9/+={_WS[1:-1]}]*)"
    rf"-+END{_WS}*(?P<end>[^-]*?)-+",
)
_SPACES = re.compile(f"{_WS}+")


@dataclass(frozen=True, slots=True)
class PemEntry:
    """One PEM entry: its label (``CERTIFICATE``, ``ENCRYPTED PRIVATE KEY``...), its RFC 1421
    header lines if any, and its decoded bytes (DER)."""

    label: str
    headers: tuple[str, ...]
    #: Left out of the repr: a private key's bytes must never reach a log.
    der: bytes = field(default=b"", repr=False)

    def text(self) -> str:
        """The entry in the layout OpenSSL reads: armour lines, 64-column base64."""
        b64 = base64.b64encode(self.der).decode("ascii")
        lines = [f"-----BEGIN {self.label}-----", *self.headers]
        if self.headers:
            lines.append("")
        lines += [b64[i : i + 64] for i in range(0, len(b64), 64)]
        lines.append(f"-----END {self.label}-----")
        return "\n".join(lines) + "\n"


def pem_entries(text: str, kind: str, what: str) -> list[PemEntry]:
    """The entries of ``text`` whose label contains ``kind`` (``CERTIFICATE`` or
    ``PRIVATE KEY``; whitespace in labels compares as one space), in order.

    :param what: names the setting in errors (``ssl.truststore.certificates``).
    :raises ConfigError: no such entry, an entry whose END does not match its BEGIN, or
        base64 that does not decode (naming ``what`` and the entry's number, never its text).
    """
    found: list[PemEntry] = []
    for number, m in enumerate(_ENTRY.finditer(text), 1):
        label = _SPACES.sub(" ", m.group("label")).strip()
        if _SPACES.sub(" ", m.group("end")).strip() != label:
            raise errors.ConfigError(
                f"{what}: PEM entry {number} ({label}) does not end with END {label}"
            )
        if kind not in label:
            continue
        try:
            der = base64.b64decode(_SPACES.sub("", m.group("body")), validate=True)
        except (binascii.Error, ValueError):
            raise errors.ConfigError(
                f"{what}: PEM entry {number} ({label}) is not valid base64"
            ) from None
        if not der:
            raise errors.ConfigError(f"{what}: PEM entry {number} ({label}) is empty")
        headers = tuple(h.strip() for h in m.group("headers").splitlines() if h.strip())
        found.append(PemEntry(label, headers, der))
    if not found:
        raise errors.ConfigError(
            f"{what}: no -----BEGIN {kind}----- ... -----END {kind}----- entry in it"
        )
    return found


def canonical_pem(text: str, kind: str, what: str) -> str:
    """``text``'s ``kind`` entries rewritten as OpenSSL reads them (see :func:`pem_entries`)."""
    return "".join(entry.text() for entry in pem_entries(text, kind, what))
