"""Finding Java and fetching a Kafka broker's jars from Maven Central into a per-version cache.

Rule 1: a version's ``lib`` folder exists only once it is complete (built in a staging
folder, then renamed), so a reader never needs the lock.
Rule 2: every Maven run holds one cache-wide lock, because several pytest processes or a
demo may provision at once and Maven 3.8 does not guard its local repository.
Rule 3: every wait (the lock, Maven, ``java -version``) is bounded.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
import zipfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sharecon.errors import KafkaError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "LATEST_PATCH",
    "BrokerStartError",
    "ClassArchive",
    "KafkaInstall",
    "cache_root",
    "find_java",
    "provision",
    "resolve_version",
]

log = logging.getLogger("sharecon.testing")

#: Newest patch release of each 4.x line on Maven Central, checked when this was written.
#: A bare ``"4.2"`` means the entry here; any full ``4.x.y`` is accepted and fetched as is.
LATEST_PATCH: dict[str, str] = {
    "4.1": "4.1.2",
    "4.2": "4.2.2",
    "4.3": "4.3.2",
    "4.4": "4.4.0",
}

#: The version tests and the demo use unless told otherwise: the newest that works.
DEFAULT_KAFKA_VERSION = "4.4.0"

# Kafka's POMs leave out the SLF4J binding its tarball ships, so without this the broker
# is silent, even when it dies. One pinned log4j2 line for every Kafka version keeps the
# three log4j jars aligned (a direct dependency wins over the transitive one).
_LOG4J_VERSION = "2.25.5"
_SLF4J_VERSION = "1.7.36"
_DEPENDENCY_PLUGIN = "3.8.1"

_MAVEN_TIMEOUT = 300.0  # seconds for one Maven run: a cold fetch takes 5-15 s here
_MAVEN_ATTEMPTS = 3
_LOCK_TIMEOUT = _MAVEN_ATTEMPTS * (_MAVEN_TIMEOUT + 10)  # another process may be fetching
_JAVA_MIN = 17

# Maven output that means "try again later", as opposed to "this does not exist".
_TRANSIENT = re.compile(
    r"Could not transfer|Connection (reset|refused|timed out)|Read timed out|"
    r"Remote host terminated|Temporary failure in name resolution|status code: 5\d\d|"
    r"\b50[234]\b|Premature end of Content-Length",
    re.IGNORECASE,
)
_VERSION_RE = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?$")


class BrokerStartError(KafkaError):
    """A test broker could not be provisioned, started or stopped.

    The message says which step failed (Java, Maven, format, start, readiness) and ends
    with the last lines of the relevant output or broker log.
    """


@dataclass(frozen=True, slots=True)
class KafkaInstall:
    """A provisioned Kafka version: its jars and the files the JVMs need."""

    version: str
    home: Path  #: ``<cache>/<version>``
    lib: Path  #: ``<cache>/<version>/lib``: the broker's and the tools' jars

    @property
    def classpath(self) -> str:
        """``lib/*``, which the JVM expands itself (pass it without a shell)."""
        return str(self.lib / "*")

    def has_class(self, name: str) -> bool:
        """Whether any jar in ``lib`` holds the class ``name`` (dotted)."""
        return _has_class(self.lib, name)


def tail(text: str, lines: int = 40) -> str:
    """The last ``lines`` lines of ``text``, indented for an error message."""
    kept = text.rstrip().splitlines()[-lines:]
    return "\n".join("    " + line for line in kept) if kept else "    (no output)"


def cache_root() -> Path:
    """Where provisioned versions live: ``$SHARECON_KAFKA_CACHE`` or ``~/.cache/sharecon/kafka``."""
    env = os.environ.get("SHARECON_KAFKA_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sharecon" / "kafka"


def resolve_version(version: str) -> str:
    """Turn ``"4.2"`` into the newest known patch and check that ``version`` is a Kafka 4.1+ number.

    :raises BrokerStartError: for anything that is not ``4.<minor>[.<patch>]`` with minor >= 1.
    """
    version = version.strip()
    if version in LATEST_PATCH:
        return LATEST_PATCH[version]
    m = _VERSION_RE.match(version)
    if not m:
        raise BrokerStartError(
            f"Kafka version {version!r} is not a version number like '4.2.2' or '4.2'"
        )
    major, minor, patch = int(m[1]), int(m[2]), m[3]
    if (major, minor) < (4, 1):
        raise BrokerStartError(
            f"Kafka {version} has no usable share groups: sharecon needs Kafka 4.1 or newer"
        )
    if patch is None:
        raise BrokerStartError(
            f"Kafka version {version!r} names no patch release; known lines: "
            + ", ".join(f"{k} -> {v}" for k, v in LATEST_PATCH.items())
        )
    return version


def find_java() -> str:
    """The ``java`` to run Kafka with: ``$SHARECON_JAVA``, ``$JAVA_HOME/bin/java``, or ``java`` on PATH.

    :raises BrokerStartError: if none is found or it is older than Java 17.
    """
    env = os.environ.get("SHARECON_JAVA")
    if env:
        candidate: str | None = env
        origin = "SHARECON_JAVA"
    elif os.environ.get("JAVA_HOME"):
        candidate = str(Path(os.environ["JAVA_HOME"]) / "bin" / "java")
        origin = "JAVA_HOME"
    else:
        candidate = shutil.which("java")
        origin = "PATH"
    if not candidate or not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
        raise BrokerStartError(
            f"Java not found (looked at {origin}): the test broker needs Java {_JAVA_MIN}+; "
            "install a JDK or set SHARECON_JAVA to a java binary"
        )
    major = _java_major(candidate)
    if major < _JAVA_MIN:
        raise BrokerStartError(
            f"{candidate} is Java {major}; Kafka 4 needs Java {_JAVA_MIN} or newer "
            "(set SHARECON_JAVA or JAVA_HOME to a newer JDK)"
        )
    return candidate


@cache
def _java_version_text(java: str) -> str:
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BrokerStartError(f"could not run {java} -version: {exc}") from exc
    return out.stderr + out.stdout


def _java_major(java: str) -> int:
    text = _java_version_text(java)
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not m:
        raise BrokerStartError(f"could not read the Java version from {java}:\n{tail(text)}")
    major = int(m[1])
    return int(m[2] or 0) if major == 1 else major  # "1.8.0" is Java 8


def provision(version: str) -> KafkaInstall:
    """Return the jars of Kafka ``version``, fetching them with Maven the first time.

    Later calls (in any process) find the finished ``lib`` folder and touch neither Maven
    nor the network.

    :raises BrokerStartError: Maven missing, the version not on Maven Central, or a
        network failure that outlasted the retries; the message holds Maven's output.
    """
    version = resolve_version(version)
    home = cache_root() / version
    lib = home / "lib"
    if _complete(lib, version):
        return KafkaInstall(version, home, lib)
    home.mkdir(parents=True, exist_ok=True)
    with _locked(cache_root() / ".provision.lock"):
        if not _complete(lib, version):  # another process may have finished meanwhile
            started = time.monotonic()
            log.info("fetching Kafka %s jars with Maven into %s", version, lib)
            _fetch(version, home)
            log.info("fetched Kafka %s in %.1f s", version, time.monotonic() - started)
    return KafkaInstall(version, home, lib)


def _complete(lib: Path, version: str) -> bool:
    return (lib / f"kafka_2.13-{version}.jar").is_file()


def _fetch(version: str, home: Path) -> None:
    mvn = shutil.which(os.environ.get("SHARECON_MAVEN", "mvn"))
    if mvn is None:
        raise BrokerStartError(
            f"Maven ('mvn') not found on PATH: it is needed once to fetch the Kafka {version} "
            f"jars into {home}; install Maven, or fill SHARECON_KAFKA_CACHE from a machine that has it"
        )
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=home))
    try:
        (staging / "pom.xml").write_text(_pom(version))
        cmd = [
            mvn,
            "-B",
            "--no-transfer-progress",
            "-f",
            str(staging / "pom.xml"),
            f"org.apache.maven.plugins:maven-dependency-plugin:{_DEPENDENCY_PLUGIN}:copy-dependencies",
            f"-DoutputDirectory={staging / 'lib'}",
            "-DincludeScope=runtime",
            *shlex.split(os.environ.get("SHARECON_MAVEN_ARGS", "")),
        ]
        for attempt in range(1, _MAVEN_ATTEMPTS + 1):
            # -U: Maven caches a failed download and would not even try again without it.
            output = _run_maven(cmd if attempt == 1 else [*cmd, "-U"], version)
            if output is None:
                break
            if attempt == _MAVEN_ATTEMPTS or not _TRANSIENT.search(output):
                raise BrokerStartError(_maven_failure(version, output))
            log.warning("Maven failed (attempt %d), retrying: %s", attempt, output[-300:])
            time.sleep(2.0 * attempt)
        missing = [
            jar
            for jar in (f"kafka_2.13-{version}.jar", f"kafka-tools-{version}.jar")
            if not (staging / "lib" / jar).is_file()
        ]
        if missing:
            raise BrokerStartError(f"Maven finished but did not produce {', '.join(missing)}")
        # Rule 1: the rename is the commit point.
        final = home / "lib"
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging / "lib", final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _run_maven(cmd: list[str], version: str) -> str | None:
    """Run Maven once; None on success, else its output."""
    try:
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=_MAVEN_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout if isinstance(exc.stdout, str) else ""
        return f"Maven timed out after {_MAVEN_TIMEOUT:.0f} s fetching Kafka {version}\n{out}"
    except OSError as exc:
        raise BrokerStartError(f"could not run Maven ({cmd[0]}): {exc}") from exc
    if done.returncode == 0:
        return None
    return done.stdout + done.stderr


def _maven_failure(version: str, output: str) -> str:
    errors = [line for line in output.splitlines() if "[ERROR]" in line]
    if re.search(
        r"(Could not find artifact|could not be resolved: |No versions available for )"
        rf"org\.apache\.kafka:kafka_2\.13:(jar:)?{re.escape(version)}",
        output,
    ):
        headline = (
            f"Kafka {version} is not on Maven Central (no org.apache.kafka:kafka_2.13:{version})"
        )
    else:
        headline = f"Maven could not fetch the Kafka {version} jars"
    return f"{headline}; Maven said:\n{tail(chr(10).join(errors) or output, 15)}"


def _pom(version: str) -> str:
    deps = [
        ("org.apache.kafka", "kafka_2.13", version, ""),
        # connect-runtime (Jetty, Jersey, ~30 MB) is pulled in by kafka-tools but none of
        # the tools we run loads it.
        (
            "org.apache.kafka",
            "kafka-tools",
            version,
            "<exclusions><exclusion><groupId>org.apache.kafka</groupId>"
            "<artifactId>connect-runtime</artifactId></exclusion></exclusions>",
        ),
        ("org.apache.logging.log4j", "log4j-slf4j-impl", _LOG4J_VERSION, ""),
        ("org.apache.logging.log4j", "log4j-core", _LOG4J_VERSION, ""),
        ("org.apache.logging.log4j", "log4j-api", _LOG4J_VERSION, ""),
        ("org.slf4j", "slf4j-api", _SLF4J_VERSION, ""),
    ]
    body = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version>{extra}</dependency>"
        for g, a, v, extra in deps
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>sharecon.testing</groupId>
  <artifactId>kafka-{version}-classpath</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{body}
  </dependencies>
</project>
"""


@contextlib.contextmanager
def _locked(
    path: Path, timeout: float = _LOCK_TIMEOUT, what: str = "fetching Kafka jars"
) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path``; ``what`` names the holder's work in the timeout error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise BrokerStartError(
                        f"gave up after {timeout:.0f} s waiting for {path}: another process "
                        f"is still {what}"
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@cache
def _has_class(lib: Path, name: str) -> bool:
    entry = name.replace(".", "/") + ".class"
    for jar in sorted(lib.glob("*.jar")):
        try:
            with zipfile.ZipFile(jar) as zf:
                zf.getinfo(entry)
                return True
        except KeyError:
            continue
        except (OSError, zipfile.BadZipFile):
            continue
    return False


class ClassArchive:
    """A dynamic AppCDS archive of the classes a kind of JVM (broker, tools) loads.

    The first JVM of a kind dumps its classes at exit; later ones map the archive and start
    several times faster (a ``kafka-topics`` call goes from ~2.5 s to ~0.7 s here). The
    archive is keyed by the ``java`` binary, and the JVM itself ignores one that does not
    match its classpath (``-Xshare:auto``), so a stale archive only costs speed.
    """

    def __init__(self, install: KafkaInstall, java: str, kind: str) -> None:
        # An archive only fits the exact JVM build that wrote it.
        ident = os.path.realpath(java) + _java_version_text(java)
        key = hashlib.sha1(ident.encode()).hexdigest()[:12]
        self._dir = install.home / "cds"
        self.path = self._dir / f"{kind}-{key}.jsa"
        self._failed = self._dir / f"{kind}-{key}.failed"
        self._pending: Path | None = None

    def jvm_flags(self, *, dump: bool = True) -> list[str]:
        """Flags for the next JVM: use the archive, or (``dump``) write one at exit if there is none."""
        # JVM notes about the archive go to stderr, never into a tool's stdout.
        quiet = ["-Xshare:auto", "-Xlog:disable", "-Xlog:all=warning:stderr"]
        if os.environ.get("SHARECON_NO_CDS"):
            return quiet
        if self.path.is_file():
            return [*quiet, f"-XX:SharedArchiveFile={self.path}"]
        if not dump or self._failed.exists() or self._pending is not None:
            return quiet
        self._dir.mkdir(parents=True, exist_ok=True)
        self._pending = self._dir / f".{self.path.stem}-{os.getpid()}-{time.monotonic_ns()}.jsa"
        return [*quiet, f"-XX:ArchiveClassesAtExit={self._pending}"]

    def after_exit(self, ok: bool) -> None:
        """Publish the archive the JVM dumped (atomically), or remember that dumping fails."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        if ok and pending.is_file() and pending.stat().st_size > 0:
            os.replace(pending, self.path)
            return
        pending.unlink(missing_ok=True)
        if ok:  # the JVM ran fine but could not dump: do not try on every run
            self._failed.touch()
