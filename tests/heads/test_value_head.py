"""The value-head file: round trip, the backbone check by sha256, and every corrupt-file case as one
clear error (its JSON read against a schema: issue 62, item 3)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from damaged_files import WHOLE_FILE

from edgereason.errors import ConfigError, ModelError
from edgereason.heads.backbone import file_sha256
from edgereason.heads.value_head import (
    Backbone,
    ValueHead,
    head_paths,
    load_head,
    save_head,
)


def random_head(
    backbone: Backbone, k: int = 12, hidden: int = 5, seed: int = 0, n_vocab: int = 100
) -> ValueHead:
    rng = np.random.default_rng(seed)
    tokens = np.sort(rng.choice(n_vocab, size=k, replace=False))
    f32 = lambda *shape: rng.normal(size=shape).astype(np.float32)  # noqa: E731
    w1, b1 = (f32(hidden, k), f32(hidden)) if hidden else (None, None)
    return ValueHead(
        backbone,
        tokens,
        f32(k),
        np.abs(f32(k)) + 0.5,
        f32(1, hidden or k),
        f32(1),
        w1,
        b1,
        record={"val_step_auc": 0.8},
    )


@pytest.mark.parametrize("hidden", [5, 0])
def test_round_trip_keeps_scores(tmp_path: Path, hidden: int):
    head = random_head(Backbone("m", "m.gguf", "ab" * 32), hidden=hidden)
    save_head(head, tmp_path / "h.safetensors")
    back = load_head(tmp_path / "h.json")  # either file names the pair
    rows = np.random.default_rng(1).normal(size=(4, 100)).astype(np.float32)
    assert [back.score(r) for r in rows] == pytest.approx([head.score(r) for r in rows], abs=1e-6)
    assert all(0.0 <= back.score(r) <= 1.0 for r in rows)
    assert back.record == {"val_step_auc": 0.8} and back.backbone == head.backbone
    # no temp files left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.json", "h.safetensors"]


def test_an_undefined_measure_in_the_record_is_written_as_null(tmp_path: Path):
    """train-prm's and finetune_verifier's records hold NaN where one class is missing; JSON has no
    NaN."""
    import json

    head = random_head(Backbone("m", "m.gguf", "ab" * 32))
    _, meta = save_head(
        ValueHead(**{**head.__dict__, "record": {"val_step_auc": float("nan"), "n": [1.5]}}),
        tmp_path / "h.safetensors",
    )
    strict = json.loads(
        meta.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the head's JSON")
    )
    assert strict["training"] == {"val_step_auc": None, "n": [1.5]}
    assert load_head(meta).record == {"val_step_auc": None, "n": [1.5]}


def layer_head(
    backbone: Backbone, k: int, layers: tuple[int, ...], width: int, seed: int = 0
) -> ValueHead:
    rng = np.random.default_rng(seed)
    d = k + width * len(layers)
    f32 = lambda *shape: rng.normal(size=shape).astype(np.float32)  # noqa: E731
    return ValueHead(
        backbone,
        np.sort(rng.choice(100, size=k, replace=False)),
        f32(d),
        np.abs(f32(d)) + 0.5,
        f32(1, 5),
        f32(1),
        f32(5, d),
        f32(5),
        layers=layers,
    )


@pytest.mark.parametrize("k", [0, 12])
def test_a_head_that_reads_layers_round_trips_as_version_2(tmp_path: Path, k: int):
    import json

    head = layer_head(Backbone("m", "m.gguf", "ab" * 32), k, (3, 7), width=6)
    _, meta = save_head(head, tmp_path / "h")
    written = json.loads(meta.read_text())
    assert (
        written["version"] == 2 and written["layers"] == [3, 7] and "layer 7" in written["features"]
    )
    back = load_head(meta)
    assert back.layers == (3, 7) and back.layer_width == 6
    rng = np.random.default_rng(1)
    logits, hidden = (
        rng.normal(size=(3, 100)).astype(np.float32),
        rng.normal(size=(3, 2, 6)).astype(np.float32),
    )
    assert [back.score(z, h) for z, h in zip(logits, hidden)] == pytest.approx(
        [
            head.score_features(np.concatenate([z[head.tokens], h.ravel()]))
            for z, h in zip(logits, hidden)
        ],
        abs=1e-6,
    )
    assert len({round(back.score(z, h), 6) for z, h in zip(logits, hidden)}) == 3
    plain, _ = save_head(random_head(Backbone("m", "m.gguf", "ab" * 32)), tmp_path / "p")
    # older readers still read logit heads
    assert json.loads(head_paths(plain)[1].read_text())["version"] == 1


def test_layer_features_that_do_not_divide_into_the_layers_are_refused():
    head = layer_head(Backbone("m", "m.gguf", "0" * 64), 4, (3, 7), width=6)
    # 4 + 13 columns: not two layers of one width
    with pytest.raises(ModelError, match="do not fit"):
        ValueHead(
            head.backbone,
            head.tokens,
            np.zeros(17, np.float32),
            np.ones(17, np.float32),
            head.w2,
            head.b2,
            np.zeros((5, 17), np.float32),
            head.b1,
            layers=(3, 7),
        )
    with pytest.raises(ModelError, match="do not fit"):
        ValueHead(
            head.backbone,
            head.tokens,
            head.mean,
            head.std,
            head.w2,
            head.b2,
            head.w1,
            head.b1,
            layers=(-1, 7),
        )


def test_backbone_is_checked_by_sha256(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path / "home"))
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 64)
    head = random_head(Backbone("model", "model.gguf", file_sha256(model)))
    head.check_backbone(model, n_vocab=100)
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF" + b"\1" * 64)
    with pytest.raises(ConfigError, match="trained on model"):
        head.check_backbone(other, n_vocab=100)
    with pytest.raises(ConfigError, match="vocabulary"):
        head.check_backbone(model, n_vocab=10)


def test_corrupt_and_missing_files_are_one_clear_error(tmp_path: Path):
    weights, meta = head_paths(tmp_path / "h")
    with pytest.raises(ConfigError, match="not found"):
        load_head(weights)
    save_head(random_head(Backbone("m", "m.gguf", "0" * 64)), weights)
    weights.write_bytes(weights.read_bytes()[:40])  # truncated
    with pytest.raises(ModelError, match="corrupt"):
        load_head(weights)
    save_head(random_head(Backbone("m", "m.gguf", "0" * 64)), weights)
    meta.write_text('["not a head"]')
    with pytest.raises(ModelError, match="corrupt or not a value head"):
        load_head(weights)
    other = tmp_path / "model.gguf"
    other.write_bytes(b"GGUF" + b"\1" * 64)
    with pytest.raises(ConfigError, match="model.gguf is not a value head"):
        load_head(other)


def _meta_edited(change) -> bytes:
    meta = {"format": "edgereason-value-head", "version": 2, "layers": [3]}
    meta["backbone"] = {"name": "m", "file": "m.gguf", "sha256": "0" * 64}
    change(meta)
    return json.dumps(meta).encode()


@pytest.mark.parametrize(
    "content, message",
    [
        *WHOLE_FILE.values(),
        (_meta_edited(lambda m: m.update(format="other")), 'format must be "edgereason-value-'),
        (_meta_edited(lambda m: m.update(backbone=None)), "backbone must be an object, not null"),
        (_meta_edited(lambda m: m["backbone"].pop("sha256")), "backbone.sha256 is missing"),
        (_meta_edited(lambda m: m.update(layers=["x"])), "layers[0] must be a whole number, not"),
        (_meta_edited(lambda m: m.update(version=float("nan"))), "version must be a whole number"),
        (_meta_edited(lambda m: m.update(version=99)), "format version 99 is newer than"),
        (_meta_edited(lambda m: m.update(adapter={"file": 1})), "adapter.file must be a string"),
    ],
    ids=[*WHOLE_FILE, "format", "backbone null", "no sha256", "layers", "NaN", "newer", "adapter"],
)
def test_a_damaged_head_json_is_one_line_naming_it(tmp_path: Path, content: bytes, message: str):
    """Nesting past Python's recursion limit was a RecursionError traceback."""
    weights, meta = save_head(random_head(Backbone("m", "m.gguf", "0" * 64)), tmp_path / "h")
    meta.write_bytes(content)
    with pytest.raises(ModelError) as e:
        load_head(weights)
    assert str(e.value).startswith("h.json: ") and message in str(e.value)


def test_tensors_that_do_not_fit_are_refused():
    head = random_head(Backbone("m", "m.gguf", "0" * 64))
    with pytest.raises(ModelError, match="do not fit"):
        ValueHead(
            head.backbone,
            head.tokens,
            head.mean,
            head.std,
            head.w2,
            head.b2,
            head.w1[:, :3],
            head.b1,
        )


@pytest.mark.parametrize(
    "change",
    [
        # failed at the search's first score (numpy could not broadcast)
        {"mean": np.zeros((12, 3), np.float32)},
        {
            "tokens": np.zeros(0, np.int32),
            "mean": np.zeros(0, np.float32),
            "std": np.zeros(0, np.float32),
            "w1": np.zeros((5, 0), np.float32),
        },  # failed in the backbone check (the max of no tokens)
        # read logits from the end of each row, silently
        {"tokens": -np.arange(1, 13, dtype=np.int32)},
    ],
)
def test_a_head_file_with_tensors_of_the_wrong_shape_or_ids_is_refused_on_load(
    tmp_path: Path, change
):
    from safetensors.numpy import load_file, save_file

    weights, _ = save_head(random_head(Backbone("m", "m.gguf", "0" * 64)), tmp_path / "h")
    save_file({**load_file(str(weights)), **change}, str(weights))
    with pytest.raises(ModelError, match="do not fit together"):
        load_head(weights)


def test_names_with_dots_keep_them(tmp_path: Path):
    weights, meta = head_paths(tmp_path / "head-qwen2.5-coder-0.5b.safetensors")
    assert (weights.name, meta.name) == (
        "head-qwen2.5-coder-0.5b.safetensors",
        "head-qwen2.5-coder-0.5b.json",
    )
    assert head_paths(tmp_path / "head-qwen2.5-coder-0.5b.json") == (weights, meta)


def test_a_head_with_a_lora_adapter_round_trips_as_version_3_and_checks_the_adapter(
    tmp_path: Path, monkeypatch
):
    import json
    from dataclasses import replace

    from edgereason.heads.value_head import Adapter

    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path / "home"))
    adapter = tmp_path / "h.lora.gguf"
    adapter.write_bytes(b"GGUF" + b"\2" * 64)
    head = replace(
        random_head(Backbone("m", "m.gguf", "ab" * 32)),
        adapter=Adapter(adapter.name, file_sha256(adapter), adapter),
    )
    _, meta = save_head(head, tmp_path / "h")
    # an older EdgeReason refuses it instead of dropping the LoRA
    assert json.loads(meta.read_text())["version"] == 3
    assert load_head(meta).adapter == head.adapter
    adapter.write_bytes(b"GGUF" + b"\3" * 64)
    with pytest.raises(ModelError, match="not the LoRA adapter"):
        load_head(meta)
    adapter.unlink()
    with pytest.raises(ConfigError, match="adapter .* is missing"):
        load_head(meta)
