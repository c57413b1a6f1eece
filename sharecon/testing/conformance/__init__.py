"""Differential conformance: the same scripted scenarios on the model broker and a real one.

* :mod:`.scenario`: the script language (steps) and what a step shows (observations).
* :mod:`.model_runner`: plays a script on :class:`~sharecon.testing.model.ModelBroker`.
* :mod:`.broker_runner`: plays it on a real broker over sharecon's connection layer.
* :mod:`.scenarios`: the scripts.

See "The model broker" in ``docs/testing.md``.
"""
