"""The offline model registry: names, cache paths and GGUF checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgereason import models
from edgereason.errors import ConfigError, ModelError


def test_registry_has_the_offline_models():
    assert set(models.REGISTRY) == {"smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}
    assert models.DEFAULT_MODEL == "qwen2.5-coder-1.5b"
    assert len(models.REGISTRY["qwen2.5-coder-0.5b"].pieces) == 6
    assert len(models.REGISTRY["qwen2.5-coder-1.5b"].pieces) == 22


def test_resolve_cached_model_checks_gguf(smollm2_path: Path):
    assert models.resolve("smollm2-135m") == smollm2_path
    assert smollm2_path.read_bytes()[:4] == b"GGUF"


def test_home_follows_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    spec = models.REGISTRY["smollm2-135m"]
    assert models.cache_path(spec).parent == tmp_path / "models"
    with pytest.raises(ModelError, match="models pull smollm2-135m"):
        models.resolve("smollm2-135m", allow_pull=False)


def test_an_empty_home_variable_means_the_default_not_the_current_folder(monkeypatch):
    monkeypatch.setenv("EDGEREASON_HOME", "")  # `EDGEREASON_HOME= edgereason ...`: models were pulled into ./models
    assert models.home() == Path.home() / ".cache" / "edgereason"


def test_bad_paths(tmp_path):
    with pytest.raises(ModelError, match="not found"):
        models.resolve(str(tmp_path / "x.gguf"))
    junk = tmp_path / "junk.gguf"
    junk.write_text("hello")
    with pytest.raises(ModelError, match="not a GGUF"):
        models.resolve(str(junk))


@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_name_is_named_empty_not_the_current_folder(name):
    """Path("") is ".": an empty --model was "model path is not a file: ."."""
    with pytest.raises(ConfigError, match="^the PRM name is empty; name one of smollm2-135m"):
        models.resolve(name, role="PRM")
