"""Build a container image for an application run by ``sharecon worker``, locally.

Like :mod:`sharecon.testing.image` (no image registry needed), the image is assembled
from parts this machine can reach:

* a Debian bookworm base with Debian's ``python3`` (``debootstrap --variant=minbase``,
  cached: later builds reuse it);
* the sharecon wheel (built from this checkout, or given with ``--wheel``) and its
  dependencies, installed with pip into ``/opt/sharecon/site`` (on ``PYTHONPATH``) for
  Debian's Python (same version and platform as the Python running the build);
* the application: the files given with ``--app``, copied into ``/app``.

The tree is imported with ``docker import``; the image runs as user 1000 (``app``) in
``/app``, its entry point is ``python3 -m sharecon.cli worker``, so arguments (or
``SHARECON_*`` variables) say the rest::

    python -m sharecon.testing.app_image build --app examples/worker.py --tag sharecon-worker-example
    docker run --network host sharecon-worker-example worker.py:handle -g billing -t invoices

``docker stop`` sends SIGTERM: the worker drains (no new records, those in flight
finish, members leave the group) and exits 0 (see docs/deploy.md). Needs root
(``debootstrap``), a running Docker engine and the ``docker`` CLI.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from sharecon.testing._provision import BrokerStartError
from sharecon.testing.image import (
    DEFAULT_SUITE,
    _add_user,
    _debootstrap_tree,
    _import_tree,
    _run,
    images_root,
)

if TYPE_CHECKING:
    import os

__all__ = ["DEFAULT_TAG", "build_worker_image", "python_base_tree"]

log = logging.getLogger("sharecon.testing")

#: The tag :func:`build_worker_image` gives by default.
DEFAULT_TAG = "sharecon/worker-app:local"
_APP_UID = 1000
_ROOT = Path(__file__).resolve().parents[2]

_CHANGES = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV PYTHONPATH=/opt/sharecon/site",
    "ENV PYTHONUNBUFFERED=1",
    "WORKDIR /app",
    "USER app",
    'ENTRYPOINT ["python3", "-m", "sharecon.cli", "worker"]',
    "LABEL org.sharecon.local-build=true",
)


def python_base_tree(suite: str = DEFAULT_SUITE, *, mirror: str | None = None) -> Path:
    """The Debian base with Debian's ``python3``, made with ``debootstrap`` once and cached.

    :raises BrokerStartError: ``debootstrap`` missing or failing.
    """
    return _debootstrap_tree(
        images_root() / f"debian-{suite}-python3",
        marker="usr/bin/python3",
        include="python3,ca-certificates",
        what="Python base tree",
        needed_for="the worker image",
        lock=".python-base.lock",
        suite=suite,
        mirror=mirror,
    )


def _debian_python(root: Path) -> tuple[int, int]:
    """Debian's Python version in the tree (``/usr/lib/python3.X``)."""
    found = sorted(
        p.name for p in (root / "usr" / "lib").glob("python3.*") if (p / "os.py").exists()
    )
    if not found:
        raise BrokerStartError(f"no Python standard library found in {root}/usr/lib")
    major, minor = found[-1].removeprefix("python").split(".")[:2]
    return int(major), int(minor)


def build_wheel(out: Path) -> Path:
    """Build the sharecon wheel of this checkout into ``out`` and return its path."""
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(out), str(_ROOT)],
        "building the sharecon wheel",
        timeout=600,
    )
    wheels = sorted(out.glob("sharecon-*.whl"))
    if not wheels:
        raise BrokerStartError(f"pip wheel made no sharecon wheel in {out}")
    return wheels[-1]


def build_worker_image(
    app: list[str | os.PathLike[str]],
    *,
    tag: str = DEFAULT_TAG,
    wheel: str | os.PathLike[str] | None = None,
    docker: str = "docker",
) -> str:
    """Build and tag the image for the application files ``app``; return the tag.

    :raises BrokerStartError: a missing tool or input, a Python mismatch, or a failing
        step (its output named).
    """
    docker_cli = shutil.which(docker)
    if docker_cli is None:
        raise BrokerStartError(f"{docker!r} not found: the image build needs the Docker CLI")
    files = [Path(a) for a in app]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise BrokerStartError(f"application file(s) not found: {', '.join(missing)}")
    base = python_base_tree()
    version = _debian_python(base)
    if version != sys.version_info[:2]:
        raise BrokerStartError(
            f"Debian's Python is {version[0]}.{version[1]}, this interpreter is "
            f"{sys.version_info[0]}.{sys.version_info[1]}: run the build with Python "
            f"{version[0]}.{version[1]} so pip installs wheels that fit"
        )
    images_root().mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-worker-", dir=images_root()))
    try:
        wheel_path = Path(wheel) if wheel is not None else build_wheel(work / "wheels")
        root = work / "rootfs"
        _run(["cp", "-al", str(base), str(root)], "copying the base tree")
        site = root / "opt" / "sharecon" / "site"
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-compile",
                "--target",
                str(site),
                str(wheel_path),
            ],
            "installing sharecon into the image",
            timeout=600,
        )
        app_dir = root / "app"
        app_dir.mkdir()
        for f in files:
            shutil.copyfile(f, app_dir / f.name)
            (app_dir / f.name).chmod(0o644)
        _add_user(root, "app", _APP_UID, shell="/usr/sbin/nologin")
        _import_tree(docker_cli, root, tag, _CHANGES)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info("built %s", tag)
    return tag


def main(argv: list[str] | None = None) -> int:
    """``python -m sharecon.testing.app_image build --app FILE... [--tag T] [--wheel W]``."""
    parser = argparse.ArgumentParser(
        prog="python -m sharecon.testing.app_image",
        description="Build an image for an application run by `sharecon worker`.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build and tag the image")
    build.add_argument("--app", action="append", required=True, help="an application file")
    build.add_argument("--tag", default=DEFAULT_TAG, help=f"image tag (default {DEFAULT_TAG})")
    build.add_argument("--wheel", default=None, help="a sharecon wheel (default: build one)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        tag = build_worker_image(args.app, tag=args.tag, wheel=args.wheel)
    except BrokerStartError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
