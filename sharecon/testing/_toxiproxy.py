"""Finding, or building once, the Toxiproxy server that :class:`~sharecon.testing.FaultProxy` runs.

Toxiproxy (Shopify's TCP fault proxy, written in Go) is pinned to one version and built from
the Go module proxy with ``go install`` the first time it is needed, then cached beside the
Kafka jars. Order of preference:

1. ``$SHARECON_TOXIPROXY``: a ``toxiproxy-server`` binary you provide (used as is);
2. the cached build, ``<cache>/toxiproxy/<version>/toxiproxy-server``, where ``<cache>`` is
   the parent of the Kafka jar cache (``~/.cache/sharecon`` by default);
3. ``go install github.com/Shopify/toxiproxy/v2/cmd/server@v<version>`` into a staging folder,
   then an atomic rename into the cache.

The same rules as the Kafka jars (see ``_provision``): the cached binary exists only once it
is complete (rename is the commit point, so readers need no lock); one build at a time across
processes (a lock file); every wait is bounded.

Pre-provision from a shell (prints the binary's path): ``python -m sharecon.testing._toxiproxy``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sharecon.testing._provision import BrokerStartError, _locked, cache_root, tail

__all__ = ["TOXIPROXY_VERSION", "main", "toxiproxy_cache_dir", "toxiproxy_server"]

log = logging.getLogger("sharecon.testing")

#: The Toxiproxy release FaultProxy is written against (its REST API and toxic semantics).
TOXIPROXY_VERSION = "2.5.0"

_MODULE = "github.com/Shopify/toxiproxy/v2"
_PACKAGE = f"{_MODULE}/cmd/server"
_BINARY = "toxiproxy-server"
# ``go install`` names the binary after the package folder, ``cmd/server``.
_GO_OUTPUT = "server"
# A cold build (module download + compile) takes ~40 s on 2 cores; leave room for a slow proxy.
_BUILD_TIMEOUT = 600.0
_LOCK_TIMEOUT = _BUILD_TIMEOUT + 60.0  # another process may be building
_VERSION_TIMEOUT = 30.0


def toxiproxy_cache_dir() -> Path:
    """``<cache>/toxiproxy/<version>``, a sibling of the Kafka jar cache (:func:`cache_root`).

    With the defaults that is ``~/.cache/sharecon/toxiproxy/2.5.0``; ``$XDG_CACHE_HOME`` and
    ``$SHARECON_KAFKA_CACHE`` move it along with the jars (it goes next to the jar folder).
    """
    return cache_root().parent / "toxiproxy" / TOXIPROXY_VERSION


def toxiproxy_server() -> Path:
    """The ``toxiproxy-server`` binary to run, building it with Go the first time.

    :raises BrokerStartError: ``$SHARECON_TOXIPROXY`` is set but not an executable file;
        ``go`` is not on PATH; or the build failed (the message ends with Go's output).
    """
    env = os.environ.get("SHARECON_TOXIPROXY")
    if env:
        path = Path(env).expanduser()
        if not _usable(path):
            raise BrokerStartError(
                f"SHARECON_TOXIPROXY={env!r} is not an executable file: point it at a "
                f"toxiproxy-server {TOXIPROXY_VERSION} binary, or unset it to have sharecon "
                "build one with Go"
            )
        return path
    target = toxiproxy_cache_dir() / _BINARY
    if _usable(target):
        return target
    with _locked(
        toxiproxy_cache_dir().parent / ".build.lock",
        _LOCK_TIMEOUT,
        what=f"building toxiproxy-server {TOXIPROXY_VERSION}",
    ):
        if not _usable(target):  # another process may have finished meanwhile
            _build(target)
    return target


def _usable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _build(target: Path) -> None:
    go = shutil.which("go")
    if go is None:
        raise BrokerStartError(
            f"Go ('go') not found on PATH: FaultProxy needs toxiproxy-server {TOXIPROXY_VERSION}, "
            f"built once with `go install {_PACKAGE}@v{TOXIPROXY_VERSION}` into {target.parent}; "
            "install Go 1.17+ (https://go.dev/dl/) and put it on PATH, or set SHARECON_TOXIPROXY "
            "to a toxiproxy-server binary"
        )
    started = time.monotonic()
    log.info("building toxiproxy-server %s with go install into %s", TOXIPROXY_VERSION, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Staging inside the cache folder, so the final rename stays on one file system (atomic).
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    try:
        env = dict(os.environ, GOBIN=str(staging))
        # A static binary: no C toolchain needed, as Toxiproxy's own release builds.
        env.setdefault("CGO_ENABLED", "0")
        cmd = [
            go,
            "install",
            # -X sets what `GET /version` reports ("git" otherwise), as the release builds do.
            f"-ldflags=-s -w -X {_MODULE}.Version={TOXIPROXY_VERSION}",
            f"{_PACKAGE}@v{TOXIPROXY_VERSION}",
        ]
        # A neutral cwd, so nothing in the caller's folder (go.mod, go.work) plays a part.
        output = _run(cmd, env=env, cwd=staging, timeout=_BUILD_TIMEOUT)
        if output is not None:
            raise BrokerStartError(
                f"building toxiproxy-server {TOXIPROXY_VERSION} with `go {shlex.join(cmd[1:])}` failed "
                "(it needs network access to the Go module proxy, $GOPROXY); fix that, or set "
                f"SHARECON_TOXIPROXY to a toxiproxy-server binary. Go said:\n{tail(output, 20)}"
            )
        built = staging / _GO_OUTPUT
        if not _usable(built):
            raise BrokerStartError(f"go install finished but produced no {built}")
        _check_version(built)
        # The rename is the commit point: readers see no binary or a complete one.
        os.replace(built, target)
        log.info("built toxiproxy-server in %.1f s", time.monotonic() - started)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _run(cmd: list[str], *, env: dict[str, str], cwd: Path, timeout: float) -> str | None:
    """Run ``cmd`` in its own process group; None on success, else its output.

    Own group, so that a timeout also kills the compiler and linker processes Go started.
    """
    try:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    except OSError as exc:
        raise BrokerStartError(f"could not run {cmd[0]}: {exc}") from exc
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return f"{out}\ngave up after {timeout:.0f} s"
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return None if proc.returncode == 0 else f"{out}\n(exit code {proc.returncode})"


def _check_version(binary: Path) -> None:
    """Refuse a build that does not run or does not say it is the pinned version."""
    try:
        done = subprocess.run(
            [str(binary), "-version"],
            capture_output=True,
            text=True,
            timeout=_VERSION_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BrokerStartError(f"the freshly built {binary} does not run: {exc}") from exc
    text = done.stdout + done.stderr
    if done.returncode != 0 or f"version {TOXIPROXY_VERSION}" not in text:
        raise BrokerStartError(
            f"the freshly built {binary} is not toxiproxy-server {TOXIPROXY_VERSION} "
            f"(exit {done.returncode}):\n{tail(text)}"
        )


def main(argv: list[str] | None = None) -> int:
    """``python -m sharecon.testing._toxiproxy``: provision toxiproxy-server and print its path."""
    if argv:
        print("usage: python -m sharecon.testing._toxiproxy (takes no arguments)", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        path = toxiproxy_server()
    except BrokerStartError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
