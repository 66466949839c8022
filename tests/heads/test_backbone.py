"""The feature tokens a head reads of its backbone's vocabulary, and the remembered sha256 of its
file, which a damaged cache does not break (issue 62, item 3)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from damaged_files import WHOLE_FILE

from edgereason.heads.backbone import feature_tokens, file_sha256


def test_feature_tokens_are_twice_the_width_and_skip_special_ids():
    tokens = feature_tokens(n_vocab=1000, n_embd=64, exclude=frozenset({0, 1, 2}))
    assert len(tokens) == 128 and len(set(tokens.tolist())) == 128
    assert not {0, 1, 2} & set(tokens.tolist()) and (np.diff(tokens) > 0).all()


@pytest.mark.parametrize(
    "content, message",
    [
        *WHOLE_FILE.values(),
        (b'{"k": null}', '["k"] must be a sha256 in hex, not null'),
        (b'{"k": "beef"}', '["k"] must be a sha256 in hex, not "beef"'),
        (b'{"k": NaN}', '["k"] must be a sha256 in hex, not NaN'),
    ],
    ids=[*WHOLE_FILE, "null", "short", "NaN"],
)
def test_a_damaged_hash_cache_is_said_hashed_again_and_rewritten(
    tmp_path, monkeypatch, capsys, content, message
):
    """Nesting past Python's recursion limit was a RecursionError; the other damage went
    unsaid."""
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path / "home"))
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 64)
    cache = tmp_path / "home" / "sha256.json"
    cache.parent.mkdir()
    cache.write_bytes(content)
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    assert file_sha256(model) == digest
    note = capsys.readouterr().err.strip()
    assert note.startswith(f"edgereason: note: {cache} is damaged (") and message in note
    assert list(json.loads(cache.read_text()).values()) == [digest]  # rewritten whole
    assert file_sha256(model) == digest and capsys.readouterr().err == ""
