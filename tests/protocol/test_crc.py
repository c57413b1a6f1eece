"""The record batch checksum: the crc32c package's C function, loaded without the package's
``__init__`` (which costs ~30 ms of imports), and the plain import as the fallback."""

from __future__ import annotations

import json
import subprocess
import sys

import crc32c as crc32c_package
import pytest

from sharecon.protocol import _crc

# The CRC-32C check value (RFC 3720, the "123456789" vector).
CHECK = 0xE3069283


def test_the_checksum_is_crc32c() -> None:
    assert _crc.crc32c(b"123456789") == CHECK
    assert _crc.crc32c(memoryview(b"xx123456789")[2:]) == CHECK
    data = bytes(range(256)) * 40
    assert _crc.crc32c(data) == crc32c_package.crc32c(data)


def test_it_is_the_packages_own_function_without_the_packages_init() -> None:
    code = (
        "import sys, json\n"
        "already = set(sys.modules)\n"
        "from sharecon.protocol import records, _crc\n"
        "names = ('crc32c', 'importlib.metadata', 'argparse')\n"
        "before = {m: m in set(sys.modules) - already for m in names}\n"
        "import crc32c\n"
        "print(json.dumps([before, crc32c.crc32c is _crc.crc32c]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    before, same = json.loads(done.stdout)
    assert before == {"crc32c": False, "importlib.metadata": False, "argparse": False}
    assert same  # a later `import crc32c` reuses the module loaded alone


@pytest.mark.parametrize("failure", [ImportError("no"), OSError("no")])
def test_without_the_extension_alone_it_falls_back_to_the_plain_import(
    monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    def refuse() -> None:
        raise failure

    monkeypatch.setattr(_crc, "_extension", refuse)
    assert _crc._load() is crc32c_package.crc32c
    monkeypatch.setattr(_crc, "_extension", lambda: None)
    assert _crc._load() is crc32c_package.crc32c
