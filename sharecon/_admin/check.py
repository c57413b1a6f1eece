"""One per-resource error check for the admin engine's answers (sans-I/O)."""

from __future__ import annotations

from sharecon import errors

__all__ = ["raise_for"]


def raise_for(code: int, what: str, detail: str | None) -> None:
    """Raise the error ``code`` maps to, naming ``what`` (and the broker's ``detail``,
    where it gave one); nothing for success.

    :raises BrokerError: ``code`` is an error.
    """
    err = errors.error_for_code(code, what + (f": {detail}" if detail else ""))
    if err is not None:
        raise err
