"""``python -m sharecon``: the same as the ``sharecon`` console script."""

from __future__ import annotations

from sharecon.cli import main

raise SystemExit(main())
