"""A griffe extension for the docs site: Sphinx roles in docstrings become inline code.

sharecon's docstrings are reST-ish (``:param x:``, ``:class:`KafkaError```). mkdocstrings'
sphinx style reads the fields but leaves the roles as text, so the reference would show
``:class:~sharecon.errors.KafkaError``. This rewrites each role to its target in
backticks, dropping a leading ``~`` (Sphinx's "show the last component") and keeping the
last component only in that case, before the docstring is rendered. mkdocs.yml loads it
(``extensions:`` of the python handler).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|data|mod|exc|obj|const):`(~?)([^`]+)`")


def _replace(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2)
    if short:
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def strip_roles(text: str) -> str:
    """``:class:`~a.B``` -> ```B```, ``:meth:`a.b``` -> ```a.b```."""
    return _ROLE.sub(_replace, text)


class SphinxRoles(griffe.Extension):
    """Rewrites Sphinx roles in every docstring griffe loads."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = strip_roles(obj.docstring.value)
