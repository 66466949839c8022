"""Which value head a session takes: one trained on the running generator's paths first, then the
PRM model's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgereason import models
from edgereason.backends import Endpoint, RemoteSettings
from edgereason.errors import ConfigError
from edgereason.heads.value_head import Backbone, load_head, save_head
from edgereason.session import prm_choice
from edgereason.session.prm_choice import choose_prm, prm_for, shipped_head
from edgereason.session.settings import ModelSettings
from tests.heads.test_value_head import random_head

Q05, Q15 = "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"


def test_a_head_for_the_running_generator_comes_first(tmp_path: Path, monkeypatch):
    spec = models.REGISTRY[Q15]
    backbone = Backbone(Q15, spec.filename, spec.sha256)
    save_head(random_head(backbone, seed=1), tmp_path / f"{Q15}.safetensors")
    save_head(random_head(backbone, seed=2), tmp_path / f"{Q15}--{Q05}.safetensors")
    monkeypatch.setattr(prm_choice, "HEADS_DIR", tmp_path)
    own, for_q05 = load_head(tmp_path / f"{Q15}.json"), load_head(tmp_path / f"{Q15}--{Q05}.json")

    q05_judged = choose_prm(Q05, Q15, "auto", None)
    assert q05_judged.format == "head" and (q05_judged.head.w2 == for_q05.w2).all()
    self_judged = choose_prm(Q15, None, "auto", None)  # the 1.5B judging its own paths
    assert (self_judged.head.w2 == own.w2).all()
    # no head for that generator: the PRM model's own
    other = choose_prm("smollm2-135m", Q15, "auto", None)
    assert (other.head.w2 == own.w2).all()
    # none ships for the 0.5B in this folder
    assert choose_prm(Q05, None, "auto", None).format == "judge"
    assert shipped_head("./my-prm.gguf", Q05) is None  # only registry models have shipped heads


@pytest.mark.parametrize(("prm", "generator"), [(Q05, Q05), (Q15, Q15), (Q15, Q05)])
def test_the_shipped_heads_name_their_backbone_and_generator(prm: str, generator: str):
    head = load_head(shipped_head(prm, generator))
    assert head.backbone.name == prm and head.backbone.sha256 == models.REGISTRY[prm].sha256
    assert head.record["generator"] == generator


def test_prm_head_takes_a_shipped_heads_name(tmp_path: Path, monkeypatch):
    """`--prm-head qwen2.5-coder-1.5b-lora`: the LoRA head that ships (checked with its adapter); a
    path still wins, and an unknown name stays a missing file."""
    from edgereason.errors import ConfigError

    lora = choose_prm(Q15, None, "auto", "qwen2.5-coder-1.5b-lora")
    assert lora.format == "head" and lora.head.adapter is not None
    assert lora.head.backbone.sha256 == models.REGISTRY[Q15].sha256
    assert lora.head.adapter.path == prm_choice.HEADS_DIR / "qwen2.5-coder-1.5b-lora.lora.gguf"
    monkeypatch.chdir(tmp_path)
    save_head(
        random_head(Backbone(Q15, "f.gguf", "0" * 64), seed=3), tmp_path / "qwen2.5-coder-1.5b-lora"
    )
    assert (
        lora.head.adapter is not None
        and choose_prm(Q15, None, "auto", "qwen2.5-coder-1.5b-lora").head.adapter is None
    )  # the file in the working folder
    with pytest.raises(ConfigError, match="not found"):
        choose_prm(Q15, None, "auto", "no-such-head")


SERVED = RemoteSettings(generator=(Endpoint("http://127.0.0.1:9"),))


def test_a_served_setup_judges_unless_told_and_runs_no_head_or_hf_model_on_a_server():
    assert prm_for(ModelSettings(model=Q05, remote=SERVED)).format == "judge"
    assert (
        prm_for(ModelSettings(model=Q05, prm_format="rlhflow", remote=SERVED)).format == "rlhflow"
    )
    with pytest.raises(ConfigError, match="--prm-format head cannot be served"):
        prm_for(ModelSettings(model=Q05, prm_format="head", remote=SERVED))
    with pytest.raises(ConfigError, match="runs on the torch backend, which a served setup"):
        prm_for(ModelSettings(model="hf:/some/folder", remote=SERVED))
    with pytest.raises(ConfigError, match="runs on torch in this process; a served PRM"):
        prm_for(ModelSettings(model=Q05, prm="hf:/some/folder", remote=SERVED))
    # here, the same settings choose as choose_prm does
    assert prm_for(ModelSettings(model=Q05, prm="hf:/some/folder")).name == "hf:/some/folder"
