from __future__ import annotations

# Real-broker fixtures (kafka_broker, topic, share_group, ...) come from sharecon's pytest
# plugin, which installing sharecon registers (entry point pytest11 "sharecon"); listing it
# in pytest_plugins here as well would register it twice. See docs/testing.md.
# pytester: tests/testing runs pytest on small test files, as a user's project would.
pytest_plugins = ["pytester"]
