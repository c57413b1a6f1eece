"""The producer's engine, sans-I/O: what ``Producer`` decides, without sockets or clocks.

* :mod:`.settings` checks the producer's options once, into :class:`.settings.Settings`;
* :mod:`.inputs` normalises one record's key, value and headers and sizes it;
* :mod:`.batch` holds the records bound for one partition (:class:`.batch.Batch`) and each
  partition's queue and sequence state;
* :mod:`.accumulator` places records into batches (partition choice, the sticky
  partitioner, buffer accounting), picks the batches ready to send, and applies each
  outcome (written, retried, split, expired, failed);
* :mod:`.policy` is the table of what each Produce error code means;
* :mod:`.metadata` is the public :class:`~sharecon.producer.RecordMetadata`.

Time comes in from the caller (a ``now`` argument, or the clock it was given); wake-ups go
out through the :class:`.accumulator.Hooks` the I/O layer (:mod:`sharecon._producer`)
implements. Nothing here imports anyio, time or logging (tests/test_layering.py).
"""
