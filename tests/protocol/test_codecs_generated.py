"""sharecon/protocol/_codecs.py is exactly what tools/gen_codecs.py makes, and is used.

The client's codecs (request encoders, response decoders) are checked in as source so that
the compiled build can compile them; the rest are still built with ``exec``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sharecon.protocol import MetadataResponse, _codecs, decode_response, encode_response
from sharecon.protocol.messages._base import _Gen, decoder_for, decoder_source, encoder_for
from sharecon.protocol.messages.metadata import (
    MetadataResponsePartition,
    MetadataResponseTopic,
)

ROOT = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).parent / "ruff"


@pytest.mark.skipif(not RUFF.exists(), reason="ruff is not installed next to the interpreter")
def test_generated_codecs_are_fresh(tmp_path: Path) -> None:
    """Regenerating reproduces the committed module byte for byte."""
    out = tmp_path / "_codecs.py"
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_codecs.py"), "--out", str(out),
         "--ruff", str(RUFF)],
        check=True,
        cwd=ROOT,
    )  # fmt: skip
    committed = (ROOT / "sharecon" / "protocol" / "_codecs.py").read_text()
    assert out.read_text() == committed, "regenerate with tools/gen_codecs.py"


def test_client_codecs_come_from_the_module() -> None:
    """Every codec in the module is the one decoder_for/encoder_for hand out."""
    assert _codecs.DECODERS and _codecs.ENCODERS
    for (cls, version), fn in _codecs.DECODERS.items():
        assert decoder_for(cls, version) is fn
    for (cls, version), fn in _codecs.ENCODERS.items():
        assert encoder_for(cls, version) is fn


def test_module_codec_and_exec_codec_agree() -> None:
    """The checked-in decoder decodes what the exec-built encoder wrote, as exec's decoder
    would, and names the field when the bytes are cut short."""
    body = MetadataResponse(
        cluster_id="c",
        topics=(
            MetadataResponseTopic(
                name="t",
                partitions=tuple(
                    MetadataResponsePartition(partition_index=i, leader_id=1, leader_epoch=7)
                    for i in range(3)
                ),
            ),
        ),
    )
    frame = encode_response(3, 13, 5, body)[4:]  # response encoders are exec-built
    assert decode_response(3, 13, frame) == (5, body)
    g = _Gen()
    decoder_source(g, MetadataResponse, 13, "decode")
    assert "def decode(r):" in g.lines[0]
    with pytest.raises(Exception, match="MetadataResponse"):
        decode_response(3, 13, frame[:-3])
