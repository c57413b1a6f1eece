"""Build an ``apache/kafka``-compatible image locally, for ``SHARECON_BROKER=docker``.

Where no image registry is reachable, this assembles the image the official recipe would
(Kafka's ``docker/jvm/Dockerfile``) from parts that are reachable:

* a Debian bookworm base made with ``debootstrap --variant=minbase`` plus
  ``openjdk-17-jre-headless`` (cached: later builds reuse it);
* the Kafka jars of that version, from the same Maven cache the local brokers use;
* Kafka's own container scripts (``docker/resources/common-scripts``, ``docker/jvm/launch``,
  ``docker/server.properties``) and the ``bin/`` scripts and ``config/log4j2.yaml`` the
  official image takes from the release tarball, read from a folder given with
  ``--scripts`` or ``$SHARECON_KAFKA_DOCKER`` (default: ``../shared/reference/kafka-docker``
  beside the clone). They are used as they are, so the image reads the same ``KAFKA_*``
  environment variables as ``apache/kafka`` (through ``KafkaDockerWrapper``).

The tree is imported with ``docker import`` and tagged ``apache/kafka:<version>`` (the
default image of :class:`~sharecon.testing.env.DockerKafka`), labelled
``org.sharecon.local-build=true`` so it is told apart from the published image. Needs root
(``debootstrap``), a running Docker engine and the ``docker`` CLI::

    python -m sharecon.testing.image build --version 4.4.0
    python -m sharecon.testing.image build --version 4.4.0 --tag sharecon/kafka:4.4.0
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sharecon.testing._provision import (
    BrokerStartError,
    _locked,
    cache_root,
    provision,
    resolve_version,
    tail,
)

__all__ = ["DEFAULT_SUITE", "base_tree", "build_image", "default_tag", "kafka_docker_dir"]

log = logging.getLogger("sharecon.testing")

#: The Debian release the base tree is made from.
DEFAULT_SUITE = "bookworm"
_JRE = "openjdk-17-jre-headless"
_MIRROR = "http://deb.debian.org/debian"
_DEBOOTSTRAP_TIMEOUT = 900.0  # a cold base takes about a minute here
_IMPORT_TIMEOUT = 600.0
_APPUSER = 1000  # uid and gid of ``appuser``, as in the official image
_BIN_SCRIPTS = ("kafka-run-class.sh", "kafka-server-start.sh", "kafka-storage.sh")

# The tools' log configuration KafkaDockerWrapper expects beside server.properties; the
# release tarball has one, the reference folder does not. Written here: WARN to stderr.
_TOOLS_LOG4J2 = """\
Configuration:
  Appenders:
    Console:
      name: STDERR
      target: SYSTEM_ERR
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDERR
"""

# What the official Dockerfile ends with (CMD, USER, VOLUME, EXPOSE), plus the PATH a
# scratch import lacks.
_CHANGES = (
    'CMD ["/etc/kafka/docker/run"]',
    "USER appuser",
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "EXPOSE 9092",
    'VOLUME ["/etc/kafka/secrets", "/var/lib/kafka/data", "/mnt/shared/config"]',
    "LABEL org.sharecon.local-build=true",
)


def default_tag(version: str) -> str:
    """``apache/kafka:<version>``: the image :class:`~sharecon.testing.env.DockerKafka` runs."""
    return f"apache/kafka:{resolve_version(version)}"


def images_root() -> Path:
    """``<cache>/images``, a sibling of the Kafka jar cache (:func:`cache_root`)."""
    return cache_root().parent / "images"


def kafka_docker_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The folder with Kafka's container scripts: ``explicit``, ``$SHARECON_KAFKA_DOCKER``,
    or ``../shared/reference/kafka-docker`` beside this clone.

    :raises BrokerStartError: if it does not hold the files the image needs.
    """
    if explicit is not None:
        folder = Path(explicit)
    elif os.environ.get("SHARECON_KAFKA_DOCKER"):
        folder = Path(os.environ["SHARECON_KAFKA_DOCKER"])
    else:
        folder = Path(__file__).resolve().parents[3] / "shared" / "reference" / "kafka-docker"
    needed = ["resources/common-scripts/run", "jvm/launch", "server.properties"]
    needed += [f"opt-kafka/bin/{name}" for name in _BIN_SCRIPTS]
    needed.append("opt-kafka/config/log4j2.yaml")
    missing = [name for name in needed if not (folder / name).is_file()]
    if missing:
        raise BrokerStartError(
            f"Kafka's container scripts not found in {folder} (missing {', '.join(missing)}): "
            "pass --scripts or set SHARECON_KAFKA_DOCKER to a folder with Kafka's docker/ "
            "recipe and the release's bin/ scripts under opt-kafka/"
        )
    return folder


def base_tree(suite: str = DEFAULT_SUITE, *, mirror: str | None = None) -> Path:
    """The Debian base with Java 17, made with ``debootstrap`` once and cached.

    :raises BrokerStartError: ``debootstrap`` missing or failing.
    """
    return _debootstrap_tree(
        images_root() / f"debian-{suite}-openjdk17",
        marker="usr/bin/java",
        include=_JRE,
        what="base tree",
        needed_for="the Kafka image",
        lock=".base.lock",
        suite=suite,
        mirror=mirror,
    )


def _debootstrap_tree(
    target: Path,
    *,
    marker: str,
    include: str,
    what: str,
    needed_for: str,
    lock: str,
    suite: str,
    mirror: str | None,
) -> Path:
    """A Debian ``suite`` tree with the packages ``include`` (comma-separated) in
    ``target``, made with ``debootstrap --variant=minbase`` unless ``target/marker``
    exists; one process makes it at a time (the lock file ``lock`` in the images folder).

    :raises BrokerStartError: ``debootstrap`` missing or failing.
    """
    if (target / marker).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(
        images_root() / lock,
        timeout=_DEBOOTSTRAP_TIMEOUT + 60,
        what=f"making the Debian {what}",
    ):
        if (target / marker).exists():  # another process built it meanwhile
            return target
        debootstrap = shutil.which("debootstrap")
        if debootstrap is None:
            raise BrokerStartError(
                "debootstrap not found: install it (apt-get install debootstrap) to build "
                + needed_for
            )
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
        started = time.monotonic()
        log.info("making the %s %s with debootstrap into %s", suite, what, target)
        cmd = [
            debootstrap,
            "--variant=minbase",
            f"--include={include}",
            suite,
            str(staging),
            mirror or os.environ.get("SHARECON_DEBIAN_MIRROR") or _MIRROR,
        ]
        try:
            _run(cmd, "debootstrap", timeout=_DEBOOTSTRAP_TIMEOUT)
            staging.rename(target)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        log.info("%s ready in %.0f s", what, time.monotonic() - started)
    return target


def build_image(
    version: str,
    *,
    tag: str | None = None,
    scripts: str | os.PathLike[str] | None = None,
    docker: str = "docker",
) -> str:
    """Build and tag the image for Kafka ``version``; return the tag.

    :raises BrokerStartError: a missing tool or input, or a failing step (its output named).
    """
    version = resolve_version(version)
    tag = tag or default_tag(version)
    scripts_dir = kafka_docker_dir(scripts)
    docker_cli = shutil.which(docker)
    if docker_cli is None:
        raise BrokerStartError(f"{docker!r} not found: the image build needs the Docker CLI")
    install = provision(version)
    base = base_tree()
    work = Path(tempfile.mkdtemp(prefix=f".build-{version}-", dir=images_root()))
    try:
        root = work / "rootfs"
        # Hard links: the copy is instant, and files changed below are replaced, not edited.
        _run(["cp", "-al", str(base), str(root)], "copying the base tree")
        _add_kafka(root, install.lib, scripts_dir)
        _add_user(root, "appuser", _APPUSER, shell="/bin/bash")
        _import_tree(docker_cli, root, tag, _CHANGES)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info("built %s", tag)
    return tag


def _add_kafka(root: Path, lib: Path, scripts: Path) -> None:
    kafka = root / "opt" / "kafka"
    for sub in ("bin", "libs", "config"):
        (kafka / sub).mkdir(parents=True)
    for jar in lib.glob("*.jar"):
        _copy_data(jar, kafka / "libs" / jar.name)
    for name in _BIN_SCRIPTS:
        _copy_exec(scripts / "opt-kafka" / "bin" / name, kafka / "bin" / name)
    log4j2 = scripts / "opt-kafka" / "config" / "log4j2.yaml"
    _copy_data(log4j2, kafka / "config" / "log4j2.yaml")
    (kafka / "config" / "tools-log4j2.yaml").write_text(_TOOLS_LOG4J2)

    docker_dir = root / "etc" / "kafka" / "docker"
    docker_dir.mkdir(parents=True)
    for script in (scripts / "resources" / "common-scripts").iterdir():
        _copy_exec(script, docker_dir / script.name)
    _copy_exec(scripts / "jvm" / "launch", docker_dir / "launch")
    _copy_data(scripts / "server.properties", docker_dir / "server.properties")
    _copy_data(log4j2, docker_dir / "log4j2.yaml")
    (docker_dir / "tools-log4j2.yaml").write_text(_TOOLS_LOG4J2)
    for folder in ("var/lib/kafka/data", "etc/kafka/secrets", "usr/logs", "mnt/shared/config"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    # Owned by appuser, as the official Dockerfile's chown leaves them.
    for folder in ("opt/kafka", "usr/logs", "mnt/shared/config", "etc/kafka", "var/lib/kafka"):
        for path in [root / folder, *(root / folder).rglob("*")]:
            os.lchown(path, _APPUSER, _APPUSER if folder in ("opt/kafka", "usr/logs") else 0)


def _add_user(root: Path, name: str, uid: int, *, shell: str) -> None:
    """Add user and group ``name`` (``uid`` both) with a home of their own to the tree."""
    home = root / "home" / name
    home.mkdir(parents=True, exist_ok=True)
    os.chown(home, uid, uid)
    for file, line in (
        ("passwd", f"{name}:x:{uid}:{uid}::/home/{name}:{shell}\n"),
        ("group", f"{name}:x:{uid}:\n"),
    ):
        path = root / "etc" / file
        text = path.read_text()
        path.unlink()  # a hard link to the cached base: write a new file instead
        path.write_text(text + line)
        path.chmod(0o644)


def _copy_exec(src: Path, dst: Path) -> None:
    shutil.copyfile(src, dst)
    dst.chmod(0o755)


def _copy_data(src: Path, dst: Path) -> None:
    # Not copy2: a read-only source would leave a file KafkaDockerWrapper cannot rewrite.
    shutil.copyfile(src, dst)
    dst.chmod(0o644)


def _import_tree(docker_cli: str, root: Path, tag: str, changes: tuple[str, ...]) -> None:
    """``docker import`` the tree as ``tag`` with the Dockerfile-like ``changes``; the
    image the tag named before is removed."""
    cmd = [docker_cli, "import"]
    for change in changes:
        cmd += ["--change", change]
    cmd += ["-", tag]
    started = time.monotonic()
    previous = _image_id(docker_cli, tag)
    tar = subprocess.Popen(
        ["tar", "-C", str(root), "--numeric-owner", "-c", "."],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        result = subprocess.run(
            cmd, stdin=tar.stdout, capture_output=True, text=True, timeout=_IMPORT_TIMEOUT
        )
    finally:
        assert tar.stdout is not None
        tar.stdout.close()
        tar_err = tar.stderr.read().decode(errors="replace") if tar.stderr else ""
        if tar.stderr is not None:
            tar.stderr.close()
        tar.wait(timeout=60)
    if tar.returncode != 0:
        raise BrokerStartError(f"tar of {root} failed:\n{tail(tar_err)}")
    if result.returncode != 0:
        raise BrokerStartError(f"docker import failed:\n{tail(result.stderr + result.stdout)}")
    log.info("docker import of %s took %.0f s", tag, time.monotonic() - started)
    if previous and previous != _image_id(docker_cli, tag):
        # Each import is a whole new layer: drop the image this tag named before, or every
        # rebuild leaves half a gigabyte behind (kept if a container still uses it).
        subprocess.run(
            [docker_cli, "image", "rm", previous], capture_output=True, timeout=120, check=False
        )


def _image_id(docker_cli: str, tag: str) -> str | None:
    result = subprocess.run(
        [docker_cli, "image", "inspect", "--format", "{{.Id}}", tag],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return result.stdout.strip() or None if result.returncode == 0 else None


def _run(cmd: list[str], what: str, *, timeout: float = 300.0) -> None:
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise BrokerStartError(f"{what} did not finish within {timeout:.0f} s") from exc
    except OSError as exc:
        raise BrokerStartError(f"{what}: could not run {cmd[0]}: {exc}") from exc
    if result.returncode != 0:
        raise BrokerStartError(
            f"{what} failed (exit {result.returncode}):\n{tail(result.stderr + result.stdout)}"
        )


def main(argv: list[str] | None = None) -> int:
    """``python -m sharecon.testing.image build --version 4.4.0 [--tag T] [--scripts DIR]``."""
    parser = argparse.ArgumentParser(
        prog="python -m sharecon.testing.image",
        description="Build an apache/kafka-compatible image locally (debootstrap + docker import).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build and tag the image")
    build.add_argument("--version", default=None, help="Kafka version (default: the default)")
    build.add_argument("--tag", default=None, help="image tag (default apache/kafka:<version>)")
    build.add_argument("--scripts", default=None, help="Kafka's container scripts folder")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from sharecon.testing._provision import DEFAULT_KAFKA_VERSION

    try:
        tag = build_image(args.version or DEFAULT_KAFKA_VERSION, tag=args.tag, scripts=args.scripts)
    except BrokerStartError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
