"""TLS settings from certificate files (or PEM text), re-read when the files change.

Rules of this module:

1. A :class:`TlsConfig` is checked when it is made: every file is loaded once, and a file
   that cannot be used raises :class:`~sharecon.errors.ConfigError` naming the file (never
   its contents, never the key's password).
2. :meth:`TlsConfig.context` is called for each new connection. It costs a ``stat`` of each
   file; the SSL context is rebuilt only when a file changed (size, mtime or inode), so
   certificates renewed on disk (cert-manager, Vault, a cron job) are used from the next
   connection on, and an unchanged set costs no parsing.
3. Files caught half-replaced (a key that does not match the new certificate yet) are not
   fatal: the previous context stays in use, one WARNING says why, and the next connection
   tries again.
"""

from __future__ import annotations

import logging
import os
import ssl
from dataclasses import dataclass, field

from sharecon import errors

__all__ = ["TlsConfig", "warn_weakened_verification"]

logger = logging.getLogger(__name__)

# (mtime_ns, size, inode) per file, or None for a file that could not be stat'ed.
_Signature = tuple[tuple[int, int, int] | None, ...]
#: A file path: text or a path object (kept as text once checked).
StrPath = str | os.PathLike[str]


@dataclass(slots=True)
class _Cache:
    """The context built from the files as they were at ``signature`` (mutable, private)."""

    context: ssl.SSLContext | None = None
    signature: _Signature = ()
    failed: _Signature | None = None  # the signature whose load failed (warned once)
    builds: int = 0  # contexts built so far (the tests measure reuse with it)


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """TLS for broker connections, from PEM files or PEM text.

    ::

        TlsConfig(ca_file="ca.pem", cert_file="client.crt", key_file="client.key",
                  key_password=os.environ["KEY_PASSWORD"])

    :param ca_file: PEM file of CA certificates to verify the brokers with; with neither
        this nor ``ca_pem``, the system's CAs.
    :param cert_file: the client certificate (PEM; may be followed by its chain, and may
        hold the key too) for brokers that require one (mutual TLS).
    :param key_file: the certificate's private key (PEM), unless it is in ``cert_file``.
    :param key_password: the key's password when it is encrypted; never shown in ``repr``.
    :param ca_pem: CA certificates as PEM text (Kafka's ``ssl.truststore.certificates``).
    :param cert_pem: the client certificate chain as PEM text.
    :param key_pem: the private key as PEM text; never shown in ``repr``.
    :param check_hostname: verify that the broker's certificate names the host connected
        to. Turning it off (Kafka's empty ``ssl.endpoint.identification.algorithm``) lets
        anyone with a certificate from your CA impersonate a broker; a WARNING says so.

    Files are re-read when they change: a new connection after a certificate was replaced
    on disk uses the new one.

    :raises ConfigError: a file is missing or unusable, the key does not match the
        certificate, or the password is wrong (naming the file, not the secret).
    """

    ca_file: StrPath | None = None
    cert_file: StrPath | None = None
    key_file: StrPath | None = None
    key_password: str | None = field(default=None, repr=False)
    ca_pem: str | None = field(default=None, repr=False)
    cert_pem: str | None = field(default=None, repr=False)
    key_pem: str | None = field(default=None, repr=False)
    check_hostname: bool = True
    _cache: _Cache = field(default_factory=_Cache, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("ca_file", "cert_file", "key_file"):
            value = getattr(self, name)
            if value is not None:
                if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
                    raise errors.ConfigError(f"{name} must be a file path, not {value!r}")
                object.__setattr__(self, name, os.fspath(value))
        if self.ca_file is not None and self.ca_pem is not None:
            raise errors.ConfigError("give the CA certificates as ca_file or ca_pem, not both")
        if (self.cert_file is not None) + (self.cert_pem is not None) > 1 or (
            self.key_file is not None and self.key_pem is not None
        ):
            raise errors.ConfigError(
                "give the client certificate and key as files or as PEM text, not both"
            )
        has_cert = self.cert_file is not None or self.cert_pem is not None
        if (self.key_file is not None or self.key_pem is not None) and not has_cert:
            raise errors.ConfigError("a client key needs its certificate (cert_file)")
        if self.key_password is not None and not has_cert:
            raise errors.ConfigError("key_password is set but there is no client key")
        if not isinstance(self.check_hostname, bool):
            raise errors.ConfigError(
                f"check_hostname must be True or False, not {self.check_hostname!r}"
            )
        # Load everything now: a wrong path or password fails here, not at the first connect.
        self.context()
        if not self.check_hostname:
            warn_weakened_verification(
                "check_hostname",
                "hostname verification is off: any certificate signed by the trusted CAs is "
                "accepted for any broker; Kafka's ssl.endpoint.identification.algorithm is empty",
                "turn it back on when the brokers' certificates name their hosts",
            )

    @property
    def mutual(self) -> bool:
        """Whether a client certificate is presented (mutual TLS)."""
        return self.cert_file is not None or self.cert_pem is not None

    def files(self) -> tuple[str, ...]:
        """The files this configuration reads, in a fixed order."""
        paths = (self.ca_file, self.cert_file, self.key_file)
        return tuple(os.fspath(f) for f in paths if f is not None)

    def context(self) -> ssl.SSLContext:
        """The SSL context for a new connection: rebuilt only when a file changed.

        :raises ConfigError: the first load failed (later failures keep the last good one).
        """
        cache = self._cache
        signature = _signature(self.files())
        if cache.context is not None and signature == cache.signature:
            return cache.context
        try:
            built = self._build()
        except errors.ConfigError as exc:
            if cache.context is None:
                raise
            if cache.failed != signature:
                cache.failed = signature
                logger.warning("%s; still using the certificates loaded before", exc)
            return cache.context
        if cache.context is not None:
            logger.info("TLS files changed: new connections use the new certificates")
        cache.context, cache.signature, cache.failed = built, signature, None
        cache.builds += 1
        return built

    def _build(self) -> ssl.SSLContext:
        try:
            ctx = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_pem)
        except (OSError, ssl.SSLError) as exc:
            what = f"ca_file {self.ca_file}" if self.ca_file else "ca_pem"
            raise errors.ConfigError(f"{what}: cannot load CA certificates: {_why(exc)}") from None
        ctx.check_hostname = self.check_hostname
        if self.mutual:
            self._load_chain(ctx)
        return ctx

    def _load_chain(self, ctx: ssl.SSLContext) -> None:
        cert_file = None if self.cert_file is None else os.fspath(self.cert_file)
        key_file = None if self.key_file is None else os.fspath(self.key_file)
        if self.cert_pem is None and self.key_pem is None:
            assert cert_file is not None
            self._load_files(ctx, cert_file, key_file, f"cert_file {cert_file}")
            return
        # ssl loads a chain only from files: PEM text goes through a private temporary
        # folder (mode 0700) that is removed at once. tempfile (with shutil, bz2, lzma,
        # random) is imported here only: most clients never hand PEM text over.
        import tempfile

        with tempfile.TemporaryDirectory(prefix="sharecon-tls-") as tmp:
            if self.cert_pem is not None:
                cert_file = os.path.join(tmp, "cert.pem")
                _write_private(cert_file, self.cert_pem)
            if self.key_pem is not None:
                key_file = os.path.join(tmp, "key.pem")
                _write_private(key_file, self.key_pem)
            assert cert_file is not None
            self._load_files(ctx, cert_file, key_file, "the client certificate")

    def _load_files(self, ctx: ssl.SSLContext, cert: str, key: str | None, what: str) -> None:
        password = self.key_password
        try:
            # A password callable, so an encrypted key without one fails instead of
            # prompting on the terminal.
            ctx.load_cert_chain(cert, key, password=lambda: password or "")
        except ssl.SSLError as exc:  # (an OSError too: caught first)
            reason = getattr(exc, "reason", None) or ""
            pem_lib = "PEM lib" in str(exc) or reason in ("PEM_LIB", "BAD_DECRYPT")
            if "KEY_VALUES_MISMATCH" in reason:
                detail = "the key does not belong to the certificate"
            elif pem_lib and self.key_password is None:
                detail = "the key is encrypted and no key_password was given, or it is not PEM"
            elif pem_lib:
                detail = "wrong key_password, or not a PEM certificate and key"
            else:
                detail = reason or type(exc).__name__
            raise errors.ConfigError(
                f"{what}: cannot load the client certificate: {detail}"
            ) from None
        except OSError as exc:
            name = exc.filename or cert
            raise errors.ConfigError(f"{what}: cannot read {name}: {_why(exc)}") from None


# Which weakened TLS settings were already reported: once per process each, whether they
# came from a TlsConfig or an ssl_context, so that an application opening many clients
# with the same settings is told once, not per client.
_INSECURE_WARNED: set[str] = set()


def warn_weakened_verification(what: str, detail: str, advice: str) -> None:
    """One WARNING per process for each weakened setting ``what`` (``CERT_NONE`` or
    ``check_hostname``): the connection is encrypted, yet anyone on the path who has a
    certificate the settings accept can pose as the broker."""
    if what in _INSECURE_WARNED:
        return
    _INSECURE_WARNED.add(what)
    logger.warning(
        "TLS certificate verification is weakened (%s), so the broker's identity is not "
        "checked; %s",
        detail,
        advice,
    )


def _signature(files: tuple[str, ...]) -> _Signature:
    out: list[tuple[int, int, int] | None] = []
    for path in files:
        try:
            st = os.stat(path)
        except OSError:
            out.append(None)
        else:
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(out)


def _write_private(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _why(exc: BaseException) -> str:
    # OSError's strerror ("No such file or directory") without the repeated path; ssl's
    # reason code otherwise. Neither carries file contents.
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return getattr(exc, "reason", None) or str(exc) or type(exc).__name__
