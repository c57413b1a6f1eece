"""The admin client's engine: sans-I/O, like :mod:`sharecon._share` and
:mod:`sharecon._produce`.

:class:`sharecon.admin.Admin` is the façade: it keeps the public API and does the I/O
(sending through the cluster, sleeping between attempts). What to send and what an answer
means is decided here, with no I/O, clock or logging; time is passed in:

- :mod:`.results`: the public result types (re-exported by :mod:`sharecon.admin`).
- :mod:`.topics`: Metadata, CreateTopics, DeleteTopics and ListOffsets requests and
  answers, and which partitions still lack a leader.
- :mod:`.configs`: DescribeConfigs and IncrementalAlterConfigs, with credentials kept out
  of every error.
- :mod:`.groups`: ListGroups, ShareGroupDescribe, the share-group offsets calls and
  DeleteGroups.
- :mod:`.retry`: the coordinator's error codes (retry, forget the coordinator, or raise)
  and the backoff bounded by the call's deadline.

Rules (every module):

1. Each broker error becomes a :mod:`sharecon.errors` exception through
   :func:`sharecon.errors.error_for_code`, with a message naming the topic, partition,
   group or resource it concerns.
2. A credential's value never appears in an error (:func:`.configs.redact_config_values`).
3. Answers are read in the order the broker gave them; the first error is raised, after
   every result of the answer was looked at where the caller asks for it (CreateTopics).
"""
