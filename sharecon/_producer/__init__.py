"""The producer's I/O: :mod:`.sender` drives the sans-I/O engine (:mod:`sharecon._produce`)
with anyio: the dispatcher and metadata tasks, Produce and InitProducerId requests, and
the waits for metadata and buffer space."""
