"""A trained value head: P(this path still reaches the right answer) from the backbone's final
hidden state at the last token of a step (design.md section 2, "value head").

The head reads the final hidden state through the logits of a fixed set of k = 2 * n_embd vocabulary
tokens. Those logits are W_S h, where W_S [k, n_embd] are the tokens' rows of the output matrix and
h the final (normed) hidden state; W_S has full column rank, so they carry h whole (h = pinv(W_S)
z_S), and a head on them is a head on h. Reading them needs no embeddings context: llama.cpp's
embeddings mode makes every token an output (the output matrix runs over every position, a
vocabulary-sized row per token) and crashed in its AMX kernels here. A head may read middle layers'
outputs instead of (k = 0) or beside the logits: `layers` names them, and their hidden states at the
step's last token follow the k logits in the feature vector, layer by layer (d = k + len(layers) *
n_embd). A middle layer ranks a problem's final answers better than the last one
(benchmarks/results/layer-probe-cpu).

A head is two files side by side: `NAME.safetensors` (the weights) and `NAME.json` (what it was
trained on). Scoring needs only numpy: gather the d features, standardise, Linear -> ReLU -> Linear
(or one Linear), sigmoid. Tensors:
  tokens [k] int32      the vocabulary ids whose logits are the features (k may be 0 when layers
                        are read)
  mean, std [d]         feature standardisation from the training set
  w1 [h, d], b1 [h], w2 [1, h], b2 [1]    (an MLP head)   or   w2 [1, d], b2 [1]   (a linear head)
The JSON names the backbone (registry name, GGUF file name, sha256): other weights' states mean
nothing to the head, so a head is refused on any other backbone. It lists `layers` too; a head that
reads layers is format version 2, so an older EdgeReason refuses it instead of misreading it. A head
may come with a LoRA adapter of its backbone (`NAME.lora.gguf`, named in the JSON with its sha256;
format version 3): a fine-tuned verifier whose logits are read with the adapter applied
(benchmarks/lab/lora_export.py). Its states are not the generator's, so such a head always scores in
the verifier's own context."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from edgereason.errors import ConfigError, DamagedFileError, ModelError
from edgereason.heads.backbone import SHA256, file_sha256
from edgereason.util.files import write_atomic, write_text_atomic
from edgereason.util.jsonl import without_nan
from edgereason.util.schema import TEXT, Fields, ListOf, Maybe, Number, Text, read_json_file

HEAD_FORMAT = "edgereason-value-head"
HEAD_VERSION = 3  # 2: `layers` (version 1 heads read the logits only); 3: `adapter`
_TENSORS = ("tokens", "mean", "std", "w1", "b1", "w2", "b2")


@dataclass(frozen=True)
class Backbone:
    name: str  # registry name or file stem
    file: str  # GGUF file name
    sha256: str


@dataclass(frozen=True)
class Adapter:
    file: str  # GGUF LoRA adapter, beside the head's files
    sha256: str
    path: Path  # where it was found


@dataclass(frozen=True)
class ValueHead:
    backbone: Backbone
    tokens: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    w2: np.ndarray
    b2: np.ndarray
    w1: np.ndarray | None = None
    b1: np.ndarray | None = None
    record: dict[str, Any] | None = None  # how it was trained: data, sizes, AUCs
    # middle layers whose hidden states follow the logits in the features
    layers: tuple[int, ...] = ()
    adapter: Adapter | None = None  # LoRA of the backbone that the verifier's context applies

    def __post_init__(self) -> None:
        d, k, width = self.mean.shape[0], self.tokens.shape[0], self.layer_width
        inner = d if self.w1 is None else self.w1.shape[0]
        ok = (
            d > 0
            and self.mean.shape == self.std.shape == (d,)
            and self.tokens.shape == (k,)
            and (k == d if not self.layers else width > 0 and k + width * len(self.layers) == d)
            and (k == 0 or self.tokens.min() >= 0)
            and all(il >= 0 for il in self.layers)
            and self.w2.shape == (1, inner)
            and self.b2.shape == (1,)
            and (
                self.w1 is None
                or (
                    self.w1.shape == (inner, d)
                    and self.b1 is not None
                    and self.b1.shape == (inner,)
                )
            )
        )
        # else a search fails at its first score, or a negative id reads a logit from the row's end
        if not ok:
            raise ModelError(
                "the value head's tensors do not fit together (corrupt head file); train it again "
                "with edgereason train-prm"
            )

    def logits(self, features: np.ndarray) -> np.ndarray:
        """features [..., k] (the logits of `tokens`) -> [...] (pre-sigmoid)."""
        x = (np.asarray(features, dtype=np.float32) - self.mean) / self.std
        if self.w1 is not None:
            x = np.maximum(x @ self.w1.T + self.b1, 0.0)
        return (x @ self.w2.T + self.b2)[..., 0]

    @property
    def layer_width(self) -> int:
        """n_embd of the backbone when the head reads layers, else 0."""
        return (self.mean.shape[0] - self.tokens.shape[0]) // len(self.layers) if self.layers else 0

    def score(self, logits: np.ndarray, hidden: np.ndarray | None = None) -> float:
        """One next-token logits row [n_vocab] at a step's last token, and the hidden states of
        `layers` there ([len(layers), n_embd]; only for a head that reads layers) -> a score in [0,
        1]."""
        assert hidden is not None or not self.layers, (
            "a head that reads layers needs their hidden states"
        )
        return self.score_features(
            head_features(logits, self.tokens, hidden if self.layers else None)
        )

    def score_features(self, features: np.ndarray) -> float:
        z = float(self.logits(features))
        return 1.0 / (1.0 + np.exp(-z)) if z >= -30 else 0.0

    def check_backbone(self, model_path: Path, n_vocab: int) -> None:
        """ConfigError unless `model_path` holds the weights the head was trained on."""
        if len(self.tokens) and int(self.tokens.max()) >= n_vocab:
            raise ConfigError(
                f"the value head reads tokens beyond {model_path.name}'s vocabulary of {n_vocab}: "
                f"it was trained on {self.backbone.name}"
            )
        digest = file_sha256(model_path)
        if digest != self.backbone.sha256:
            raise ConfigError(
                f"the value head was trained on {self.backbone.name} ({self.backbone.file}, sha256 "
                f"{self.backbone.sha256[:12]}...) but the PRM model is {model_path.name} (sha256 "
                f"{digest[:12]}...); use --prm {self.backbone.name} or a head trained for this "
                "model"
            )


def head_features(
    logits: np.ndarray, tokens: np.ndarray, hidden: np.ndarray | None = None
) -> np.ndarray:
    """A head's feature vector (a copy): the logits of `tokens`, then the captured layers' hidden
    states ([layers, n_embd]) flattened, layer by layer. Training (the verifier's `features`) and
    scoring both build it here."""
    picked = logits[tokens]  # an index array: a copy, so the row may be reused after
    return picked if hidden is None else np.concatenate([picked, hidden.ravel()])


def head_paths(path: Path) -> tuple[Path, Path]:
    """`x.safetensors` or `x.json` or `x` -> (weights, metadata); names may hold dots
    (`qwen2.5-coder-0.5b`)."""
    base = (
        path.name.removesuffix(".safetensors").removesuffix(".json")
        if path.suffix in (".safetensors", ".json")
        else path.name
    )
    return path.with_name(base + ".safetensors"), path.with_name(base + ".json")


def load_head(path: Path) -> ValueHead:
    """Read and check a head; every defect is one ConfigError/ModelError line, never a traceback."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    given = Path(path).expanduser()
    weights, meta_path = head_paths(given)
    if given.is_file() and given not in (weights, meta_path):  # e.g. a GGUF given as --prm-head
        raise ConfigError(
            f"{given} is not a value head: a head is NAME.safetensors with NAME.json beside it; "
            "make one with edgereason train-prm"
        )
    for p in (weights, meta_path):
        if not p.is_file():
            raise ConfigError(
                f"value head file not found: {p} (a head is NAME.safetensors with NAME.json beside "
                "it; make one with edgereason train-prm)"
            )
    meta = _read_meta(meta_path)
    backbone = Backbone(**{k: meta["backbone"][k] for k in ("name", "file", "sha256")})
    layers = tuple(meta.get("layers") or ())
    adapter = _adapter(meta["adapter"], weights.parent) if meta.get("adapter") else None
    try:
        tensors = load_file(str(weights))
    except (OSError, SafetensorError) as e:
        raise ModelError(
            f"{weights.name}: corrupt or not a value head ({e}); train it again with edgereason "
            "train-prm"
        ) from None
    missing = {"tokens", "mean", "std", "w2", "b2"} - tensors.keys()
    if missing:
        raise ModelError(f"{weights.name} lacks tensors {sorted(missing)}: corrupt value head")
    arrays = {
        k: np.ascontiguousarray(v, dtype=np.int64 if k == "tokens" else np.float32)
        for k, v in tensors.items()
        if k in _TENSORS
    }
    return ValueHead(
        backbone, record=meta.get("training"), layers=layers, adapter=adapter, **arrays
    )


# what load_head reads of a head's JSON; "training" is its record, kept as it is
_META = Fields(
    {
        "format": Text(pattern=HEAD_FORMAT, name=f'"{HEAD_FORMAT}"'),
        "backbone": Fields({"name": TEXT, "file": TEXT, "sha256": SHA256}),
    },
    {
        "version": Number(whole=True, least=0),
        "layers": Maybe(ListOf(Number(whole=True))),
        "adapter": Maybe(Fields({"file": TEXT, "sha256": SHA256})),
    },
)


def _read_meta(path: Path) -> dict:
    """A head's JSON, checked (_META); ModelError naming the file and what is wrong."""
    train_again = "train it again with edgereason train-prm"
    try:
        meta = cast(dict, read_json_file(path, _META))
    except (OSError, DamagedFileError) as e:
        problem = e.problem if isinstance(e, DamagedFileError) else e.strerror or str(e)
        corrupt = f"{path.name}: corrupt or not a value head ({problem})"
        raise ModelError(f"{corrupt}; {train_again}") from None
    if meta.get("version", 0) > HEAD_VERSION:
        newer = f"format version {meta['version']} is newer than this EdgeReason reads"
        raise ModelError(f"{path.name}: {newer}; update EdgeReason, or {train_again}")
    return meta


def _adapter(entry: dict, folder: Path) -> Adapter:
    """The head's LoRA adapter, checked: ConfigError when it is missing, ModelError when it is
    another file."""
    file, sha256 = entry["file"], entry["sha256"]
    path = folder / Path(file).name
    if not path.is_file():
        raise ConfigError(
            f"the value head's LoRA adapter {path} is missing; a LoRA head is three files "
            "(NAME.safetensors, NAME.json, NAME.lora.gguf): copy them together"
        )
    if file_sha256(path) != sha256:
        raise ModelError(
            f"{path.name} is not the LoRA adapter this value head was trained with (sha256 "
            f"mismatch): corrupt or replaced; export the head again"
        )
    return Adapter(file, sha256, path)


def save_head(head: ValueHead, path: Path) -> tuple[Path, Path]:
    """Write both files through temp files and renames: a crash never leaves half a head."""
    from safetensors.numpy import save_file

    weights, meta_path = head_paths(Path(path))
    weights.parent.mkdir(parents=True, exist_ok=True)
    tensors = {
        k: np.ascontiguousarray(getattr(head, k), dtype=np.int32 if k == "tokens" else np.float32)
        for k in _TENSORS
        if getattr(head, k) is not None
    }
    read = (
        [
            f"the logits of {len(head.tokens)} vocabulary tokens (a full-rank linear image of the "
            "final hidden state)"
        ]
        if len(head.tokens)
        else []
    )
    read += [f"the hidden state of layer {il}" for il in head.layers]
    meta = {
        "format": HEAD_FORMAT,
        "version": HEAD_VERSION if head.adapter else 2 if head.layers else 1,
        "backbone": {
            "name": head.backbone.name,
            "file": head.backbone.file,
            "sha256": head.backbone.sha256,
        },
        "features": ", then ".join(read) + " at the last token of each step",
        "layers": list(head.layers),
        "hidden": None if head.w1 is None else int(head.w1.shape[0]),
        "prompt": "the generator's solve prompt, then the steps verbatim",
        "training": without_nan(head.record or {}),
    }  # JSON has no NaN: an undefined AUC is null
    if head.adapter:
        meta["adapter"] = {"file": head.adapter.file, "sha256": head.adapter.sha256}
    write_atomic(weights, lambda p: save_file(tensors, str(p)))
    write_text_atomic(meta_path, json.dumps(meta, indent=1) + "\n")
    return weights, meta_path
