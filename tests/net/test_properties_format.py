"""The Java properties format, exactly, and inline PEM stores in every layout Kafka reads.

The format cases are checked two ways: against what ``java.util.Properties`` is documented
to do (written out here), and, where a JVM is available (the test kit's, as for brokers),
against ``java.util.Properties.load`` itself on the very same bytes. The PEM layouts are
the ones Kafka's ``DefaultSslEngineFactory`` reads; tests/broker/test_properties_tls.py
connects with them, next to Kafka 4.4's own tool.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from typing import TYPE_CHECKING

import pytest

from sharecon import errors
from sharecon._net.pem import canonical_pem, pem_entries
from sharecon._net.properties import read_properties
from sharecon.config import from_properties
from tests.net.test_tls_config import PASSWORD, pki  # noqa: F401 - the certificates fixture

if TYPE_CHECKING:
    from pathlib import Path

#: Every rule of java.util.Properties#load(Reader), one or more lines each.
TRICKY = (
    "# a comment\n"
    "   ! another, after whitespace\n"
    "\n"
    "  \t \n"
    "plain=value\n"
    "colon:value\n"
    "space value\n"
    "tab\tvalue\n"
    "spaced  =  value with trailing space  \n"
    "ws_then_colon \t: v\n"
    "double==starts with =\n"
    "empty=\n"
    "bare\n"
    "key\\ with\\ spaces=v\n"
    "key\\=eq\\:colon=v\n"
    'esc=\\t\\n\\r\\f|\\\\|\\=|\\:|\\ |\\#|\\!|\\b\\q\\"\n'
    "uni=\\u0041\\u00e9\\u20AC\n"
    "pair=\\uD83D\\uDE00\n"
    "cont=first \\\n"
    "      second\\\n"
    "\t\tthird\n"
    "even=ends with a backslash\\\\\n"
    "odd=joined\\\\\\\n"
    "   next\n"
    "notcomment=a \\\n"
    "   # not a comment here\n"
    "blankcont=x\\\n"
    "\n"
    "after=blank\n"
    "crlf=one\r\n"
    "cr=two\rlf=three\n"
    "vt=a\x0bb\n"
    "hash#in=value#kept\n"
    "dup=first\n"
    "dup=second\n"
    "   indented = yes\n"
    "\\#notcomment=1\n"
    "last=eof\\"
)
EXPECTED = {
    "plain": "value",
    "colon": "value",
    "space": "value",
    "tab": "value",
    "spaced": "value with trailing space  ",
    "ws_then_colon": "v",
    "double": "=starts with =",
    "empty": "",
    "bare": "",
    "key with spaces": "v",
    "key=eq:colon": "v",
    "esc": '\t\n\r\f|\\|=|:| |#|!|bq"',
    "uni": "A\u00e9\u20ac",
    "pair": "\U0001f600",
    "cont": "first secondthird",
    "even": "ends with a backslash\\",
    "odd": "joined\\next",
    "notcomment": "a # not a comment here",
    "blankcont": "x",
    "after": "blank",
    "crlf": "one",
    "cr": "two",
    "lf": "three",
    "vt": "a\x0bb",
    "hash#in": "value#kept",
    "dup": "second",
    "indented": "yes",
    "#notcomment": "1",
    "last": "eof",
}


def test_every_rule_of_the_java_format(tmp_path: Path) -> None:
    path = tmp_path / "tricky.properties"
    path.write_bytes(TRICKY.encode("ascii"))
    assert read_properties(path) == EXPECTED


def test_latin1_when_not_utf8_and_utf8_when_it_is(tmp_path: Path) -> None:
    latin = tmp_path / "latin.properties"
    latin.write_bytes("client.id=caf\u00e9\n".encode("latin-1"))
    utf8 = tmp_path / "utf8.properties"
    utf8.write_bytes("\ufeffclient.id=caf\u00e9 \u20ac\n".encode())
    assert read_properties(latin) == {"client.id": "caf\u00e9"}
    assert read_properties(utf8) == {"client.id": "caf\u00e9 \u20ac"}


def test_a_malformed_unicode_escape_is_an_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.properties"
    path.write_text("a=1\nclient.id=x\\u12G4\n")
    with pytest.raises(errors.ConfigError, match=r"bad.properties: line 2: malformed \\uXXXX"):
        read_properties(path)


_JAVA_DUMP = textwrap.dedent(
    """\
    import java.io.*;
    import java.util.*;
    public class Dump {
        public static void main(String[] args) throws Exception {
            Properties p = new Properties();
            try (InputStream in = new FileInputStream(args[0])) { p.load(in); }
            StringBuilder out = new StringBuilder("{");
            for (String k : new TreeSet<>(p.stringPropertyNames())) {
                if (out.length() > 1) out.append(',');
                out.append(q(k)).append(':').append(q(p.getProperty(k)));
            }
            System.out.print(out.append('}'));
        }
        static String q(String s) {
            StringBuilder b = new StringBuilder("\\"");
            for (char c : s.toCharArray()) b.append(String.format("\\\\u%04x", (int) c));
            return b.append('"').toString();
        }
    }
    """
)


@pytest.mark.broker  # needs the test kit's JVM
def test_java_properties_load_reads_the_same_file_the_same_way(tmp_path: Path) -> None:
    from sharecon.testing._provision import find_java

    java = find_java()
    source = tmp_path / "Dump.java"
    source.write_text(_JAVA_DUMP)
    path = tmp_path / "tricky.properties"
    # Latin-1 bytes, as Kafka's tools read them (Properties.load(InputStream)).
    path.write_bytes((TRICKY + "\nlatin=caf\u00e9\n").encode("latin-1"))
    done = subprocess.run(
        [java, str(source), str(path)], capture_output=True, text=True, timeout=120, check=True
    )
    assert read_properties(path) == json.loads(done.stdout)


# -- inline PEM, as Kafka's tools accept it ------------------------------------------------------


def continued(pem: str, key: str, *, indent: str = "    ") -> str:
    """``key=`` and ``pem`` as Kafka's docs write it: one PEM line per properties line, each
    ending in `` \\`` and the next indented (the continuation drops the indent)."""
    lines = pem.strip().splitlines()
    body = " \\\n".join(indent + line if i else line for i, line in enumerate(lines))
    return f"{key}={body}\n"


def escaped(pem: str, key: str) -> str:
    """The ``\\n``-escaped one-line form."""
    return f"{key}=" + pem.strip().replace("\n", "\\n") + "\n"


def spaced(pem: str, key: str) -> str:
    """One line, armour and base64 separated by single spaces (what continuations give)."""
    return f"{key}=" + " ".join(pem.split()) + "\n"


LAYOUTS = [continued, escaped, spaced]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_inline_truststore_in_every_layout(pki: Path, tmp_path: Path, layout: object) -> None:  # noqa: F811
    ca = (pki / "ca.pem").read_text()
    path = tmp_path / "client.properties"
    path.write_text(
        "bootstrap.servers=broker:9093\nsecurity.protocol=SSL\nssl.truststore.type=PEM\n"
        + layout(ca, "ssl.truststore.certificates")  # type: ignore[operator]
    )
    tls = from_properties(path).config.tls
    assert tls is not None and tls.ca_pem is not None
    assert pem_entries(tls.ca_pem, "CERTIFICATE", "x") == pem_entries(ca, "CERTIFICATE", "x")
    assert tls.context().get_ca_certs()  # OpenSSL loaded it


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", ["alice", "bob"])
def test_inline_keystore_in_every_layout(
    pki: Path,  # noqa: F811
    tmp_path: Path,
    layout: object,
    name: str,
) -> None:
    password = f"ssl.key.password={PASSWORD}\n" if name == "bob" else ""
    path = tmp_path / "client.properties"
    path.write_text(
        "bootstrap.servers=broker:9093\nsecurity.protocol=SSL\nssl.keystore.type=PEM\n"
        + layout((pki / f"{name}.key").read_text(), "ssl.keystore.key")  # type: ignore[operator]
        + layout((pki / f"{name}.crt").read_text(), "ssl.keystore.certificate.chain")  # type: ignore[operator]
        + password
    )
    tls = from_properties(path).config.tls
    assert tls is not None and tls.mutual
    tls.context()  # OpenSSL loaded the key and its certificate


def test_inline_key_errors_name_the_key_not_the_password(pki: Path, tmp_path: Path) -> None:  # noqa: F811
    head = "bootstrap.servers=b:1\nsecurity.protocol=SSL\n"
    chain = continued((pki / "bob.crt").read_text(), "ssl.keystore.certificate.chain")
    cases = {
        "ssl.keystore.key is an encrypted key: set ssl.key.password": continued(
            (pki / "bob.key").read_text(), "ssl.keystore.key"
        ),
        "ssl.key.password is set but ssl.keystore.key is not encrypted": continued(
            (pki / "alice.key").read_text(), "ssl.keystore.key"
        )
        + f"ssl.key.password={PASSWORD}\n",
        "ssl.keystore.key: no -----BEGIN PRIVATE KEY-----": "ssl.keystore.key=MIIEv\n",
        "ssl.keystore.key: expected one private key, found 2": spaced(
            (pki / "alice.key").read_text() + (pki / "carol.key").read_text(), "ssl.keystore.key"
        ),
        r"ssl.keystore.key: PEM entry 1 \(PRIVATE KEY\) is not valid base64": (
            "ssl.keystore.key=-----BEGIN PRIVATE KEY----- MIIxx -----END PRIVATE KEY-----\n"
        ),
    }
    for says, lines in cases.items():
        path = tmp_path / "client.properties"
        path.write_text(head + chain + lines)
        with pytest.raises(errors.ConfigError, match=says) as caught:
            from_properties(path).config.tls.context()  # type: ignore[union-attr]
        assert PASSWORD not in str(caught.value)


def test_canonical_pem_keeps_every_certificate_and_drops_text_around_them(pki: Path) -> None:  # noqa: F811
    chain = (pki / "alice.crt").read_text() + (pki / "ca.pem").read_text()
    messy = "Bag Attributes: x\n" + " ".join(chain.split()) + "  trailing words"
    again = canonical_pem(messy, "CERTIFICATE", "chain")
    assert again == canonical_pem(chain, "CERTIFICATE", "chain")
    assert again.count("-----BEGIN CERTIFICATE-----\n") == 2
    assert all(len(line) <= 64 for line in again.splitlines())


def test_mismatched_armour_is_refused(pki: Path) -> None:  # noqa: F811
    ca = (pki / "ca.pem").read_text().replace("END CERTIFICATE", "END PRIVATE KEY")
    with pytest.raises(errors.ConfigError, match="does not end with END CERTIFICATE"):
        canonical_pem(ca, "CERTIFICATE", "ssl.truststore.certificates")


def test_a_private_keys_bytes_never_reach_a_repr(pki: Path) -> None:  # noqa: F811
    (entry,) = pem_entries((pki / "alice.key").read_text(), "PRIVATE KEY", "ssl.keystore.key")
    assert entry.der and "PRIVATE KEY" in entry.label
    assert repr(entry.der[4:20])[2:-1] not in repr(entry)
    assert "der=" not in repr(entry)
