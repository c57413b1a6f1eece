from __future__ import annotations

# Real-broker fixtures (kafka_broker, topic, share_group, ...): see docs/testing.md.
pytest_plugins = ["sharecon.testing.pytest_plugin"]
