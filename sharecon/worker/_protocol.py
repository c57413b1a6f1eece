"""What the supervisor and its worker processes agree on: report cadence and exit codes.

Kept apart from :mod:`sharecon.worker._child`, which runs as ``python -m``: the supervisor
must not import that module (``runpy`` warns when a module it runs was imported first).
"""

from __future__ import annotations

__all__ = ["EXIT_ERROR", "EXIT_NOT_FOUND", "EXIT_OK", "EXIT_USAGE", "REPORT_EVERY"]

#: Seconds between reports to the supervisor (also its sign of life).
REPORT_EVERY = 0.5

#: Drained when told to.
EXIT_OK = 0
#: Failed (restarted by the supervisor).
EXIT_ERROR = 1
#: Bad configuration or handler (not restarted: the worker stops).
EXIT_USAGE = 2
#: A topic does not exist (not restarted: the worker stops).
EXIT_NOT_FOUND = 3
