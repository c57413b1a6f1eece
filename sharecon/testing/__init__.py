"""Test support for sharecon and for applications built on it: a real Kafka broker."""

from __future__ import annotations
