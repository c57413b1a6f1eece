"""Share-group semantics, sans-I/O and synchronous (layer 2).

Rules for every module in this package:

- No I/O, no clocks, no logging, no threads: time arrives as ``now`` (monotonic seconds)
  and results leave as return values.
- Imports only the standard library, :mod:`sharecon.types`, :mod:`sharecon.errors` and
  :mod:`sharecon.protocol`.
- Broker error codes are compared by name (:class:`~sharecon.protocol.error_codes.ErrorCode`);
  what the consumer does about each is decided here (:mod:`.fetch_policy`) and returned as
  data.

Modules: :mod:`.acks` (acknowledgement batches), :mod:`.ledger` (per-partition
acknowledgement state), :mod:`.acquired` (filtering fetched data to acquired records),
:mod:`.intake` (checking, splitting and lazily decoding a ShareFetch answer),
:mod:`.fetch_policy` (the next request and the error policy of a fetch loop),
:mod:`.session` (share-session epochs and request contents), :mod:`.membership`
(the ShareGroupHeartbeat state machine).
"""

from __future__ import annotations
