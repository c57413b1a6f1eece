"""What each outcome of a Produce request means for its batch: a table of actions.

Rules of this module:

1. NONE and DUPLICATE_SEQUENCE_NUMBER mean the batch is written (the latter: an earlier
   try of the same bytes was).
2. MESSAGE_TOO_LARGE and RECORD_LIST_TOO_LARGE split a batch of several records in two
   (both halves retried, in order); a lone record fails with the error, naming its size.
3. With idempotence, OUT_OF_ORDER_SEQUENCE_NUMBER and UNKNOWN_PRODUCER_ID mean the broker
   lost (or never had) our producer state: get a new producer id, then resend at once.
   But OUT_OF_ORDER_SEQUENCE_NUMBER for a batch while an earlier batch of its partition
   is still pending (several in flight; the earlier one failed or is being resent) only
   says the broker has not seen that one yet: resend the batch after it. Without
   idempotence both are ordinary errors.
4. A retriable error refreshes metadata and retries after a backoff (at once when the
   answer named the new leader); any other error fails the batch. REQUEST_TIMED_OUT and
   NOT_ENOUGH_REPLICAS_AFTER_APPEND say the leader appended the batch but could not
   replicate it in time: retried, with the outcome unknown (as in rule 5).
5. A lost connection or a timed-out request retries the same bytes; unless the request
   was never written (the connection could not be opened) its outcome is unknown, which
   :class:`~sharecon._produce.accumulator.Accumulator` remembers (the batch is
   *ambiguous*). Any other error of the request itself fails its batches.
6. A batch past its delivery deadline, or one that would be retried while the producer
   closes, expires with :class:`~sharecon.errors.KafkaTimeoutError`.
"""

from __future__ import annotations

from enum import Enum

from sharecon import errors
from sharecon.protocol.error_codes import ErrorCode

__all__ = ["Action", "answer_action", "transport_action"]


class Action(Enum):
    """What the producer does with a batch after an answer (or no answer)."""

    #: The batch is written: complete its records (rule 1).
    WRITTEN = "written"
    #: Too large and more than one record: split it in two and send the halves (rule 2).
    SPLIT = "split"
    #: Too large and a lone record: fail it with a message naming its size (rule 2).
    TOO_LARGE = "too large"
    #: Get a new producer id, then resend the batch at once (rule 3).
    NEW_PRODUCER_ID = "new producer id"
    #: Resend the same bytes, in sequence order, after the earlier batch that is pending
    #: (rule 3).
    RESEND = "resend in order"
    #: Refresh metadata and retry (at once if the answer's leader hint was applied; rule 4).
    RETRY = "retry"
    #: Retry the same bytes; the request may have been written (rule 5).
    RETRY_AMBIGUOUS = "retry, outcome unknown"
    #: Fail the batch with the error (rules 4 and 5).
    FAIL = "fail"


_ANSWERS: dict[int, Action] = {
    ErrorCode.NONE: Action.WRITTEN,
    ErrorCode.DUPLICATE_SEQUENCE_NUMBER: Action.WRITTEN,
    ErrorCode.MESSAGE_TOO_LARGE: Action.SPLIT,
    ErrorCode.RECORD_LIST_TOO_LARGE: Action.SPLIT,
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: Action.NEW_PRODUCER_ID,
    ErrorCode.UNKNOWN_PRODUCER_ID: Action.NEW_PRODUCER_ID,
    # The leader appended the batch but could not replicate it in time (acks=all): it may
    # well be in the log, so its sequence numbers must never go to other records.
    ErrorCode.REQUEST_TIMED_OUT: Action.RETRY_AMBIGUOUS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Action.RETRY_AMBIGUOUS,
}


def answer_action(
    code: int, *, records: int, idempotent: bool, earlier_pending: bool = False
) -> Action:
    """The action for a partition's ``ErrorCode`` in a Produce answer to a batch of
    ``records`` records (rules 1 to 4); ``earlier_pending``: a batch numbered before it in
    its partition is still in flight or waiting to be resent (rule 3)."""
    action = _ANSWERS.get(code)
    if action is Action.SPLIT:
        return Action.SPLIT if records > 1 else Action.TOO_LARGE
    if action is Action.NEW_PRODUCER_ID:
        if not idempotent:
            action = None
        elif earlier_pending and code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            return Action.RESEND
    if action is not None:
        return action
    spec = errors.error_class_for_code(code)
    return Action.RETRY if spec.retriable else Action.FAIL


def transport_action(exc: errors.KafkaError) -> Action:
    """The action for a Produce request that got no answer, failing with ``exc`` (rule 5)."""
    if isinstance(exc, errors.BrokerConnectError):
        return Action.RETRY  # never written: the connection could not be opened
    if isinstance(exc, errors.KafkaConnectionError | errors.KafkaTimeoutError):
        return Action.RETRY_AMBIGUOUS
    return Action.FAIL
