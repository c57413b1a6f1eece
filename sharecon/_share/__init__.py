"""Share-group semantics, sans-I/O and synchronous (layer 2).

Rules for every module in this package:

- No I/O, no clocks, no logging, no threads: time arrives as ``now`` (monotonic seconds)
  and results leave as return values.
- Imports only the standard library, :mod:`sharecon.types`, :mod:`sharecon.errors`
  (and later :mod:`sharecon.protocol`).
- Broker error codes stay plain ``int`` data until the consumer decides what to do.

Modules: :mod:`.acks` (acknowledgement batches), :mod:`.ledger` (per-partition
acknowledgement state), :mod:`.acquired` (filtering fetched data to acquired records),
:mod:`.session` (share-session epochs and request contents), :mod:`.membership`
(the ShareGroupHeartbeat state machine), :mod:`.backoff` (jittered retry delays).
"""

from __future__ import annotations
