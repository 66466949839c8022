"""Loading a PRM checkpoint into torch: a local Hugging Face folder or a .gguf file, offline.

Rules:
- Offline only (`local_files_only=True`). The checkpoint's own code runs only when this transformers
  does not know its model type and its config names code (`auto_map`); that is said on stderr. The
  public PRMs need none: their backbones are Qwen2/Llama/Mistral, and the reward heads are read here
  from the weight files by name.
- bf16 on a GPU, fp32 on the CPU; heads compute in fp32.
- The backbone gives `last_hidden_state`, the final hidden state after the final norm (what every
  readout takes).
- Every defect (torch missing, CUDA missing, not a checkpoint, a format it does not match) is one
  ConfigError/ModelError line.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgereason.backends.transformers.torch_device import import_torch, resolve_device
from edgereason.backends.transformers.value_head_readout import (
    check_head_runs_here,
    value_head_readout,
)
from edgereason.errors import ConfigError, ModelError
from edgereason.heads.value_head import ValueHead

# reward-head tensors by format, as the public checkpoints name them
HEAD_TENSORS = {
    # Linear(h,h), ReLU, Linear(h,2)
    "qwen-prm": ("score.0.weight", "score.0.bias", "score.2.weight", "score.2.bias"),
    "skywork": ("v_head.summary.weight", "v_head.summary.bias"),  # Linear(h,1), sigmoid
}
# read two tokens' logits from the language-model head
LOGIT_FORMATS = {"math-shepherd", "rlhflow", "judge"}

Readout = Callable[[Any], list[float]]  # hidden states [n, h] -> n scores in [0, 1]


@dataclass(frozen=True)
class Source:
    """Where from_pretrained reads: a folder, and a .gguf file name inside it when loading a
    GGUF."""

    folder: Path
    gguf_file: str | None

    @property
    def kwargs(self) -> dict[str, Any]:
        return {
            "local_files_only": True,
            **({"gguf_file": self.gguf_file} if self.gguf_file else {}),
        }


def source(path: Path) -> Source:
    path = Path(path).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return Source(path.parent, path.name)
    if path.is_dir() and (path / "config.json").is_file():
        return Source(path, None)
    if not path.exists():
        raise ModelError(f"PRM checkpoint not found: {path}")
    raise ModelError(
        f"{path} is not a Hugging Face checkpoint (a folder with config.json) or a .gguf file"
    )


def _needs_own_code(src: Source) -> bool:
    if src.gguf_file:
        return False
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    try:
        config = json.loads((src.folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ModelError(f"{src.folder / 'config.json'}: unreadable ({e})") from None
    return config.get("model_type") not in CONFIG_MAPPING and "auto_map" in config


def load_config(path: Path) -> Any:
    import_torch()
    from transformers import AutoConfig

    src = source(path)
    try:
        return AutoConfig.from_pretrained(
            src.folder, trust_remote_code=_needs_own_code(src), **src.kwargs
        )
    except (OSError, ValueError, KeyError) as e:
        raise ModelError(
            f"{path}: not a checkpoint transformers can load ({_first_line(e)})"
        ) from None


@dataclass
class Checkpoint:
    path: Path
    backbone: Any  # input_ids + cache -> last_hidden_state (after the final norm)
    tokenizer: Any
    readout: Readout
    config: Any
    device: Any
    dtype: Any


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _head_tensors(src: Source, names: tuple[str, ...], fmt: str) -> dict[str, Any]:
    """The named tensors from the checkpoint's safetensors files, or one ModelError saying the head
    is missing."""
    from safetensors import safe_open

    found: dict[str, Any] = {}
    if not src.gguf_file:
        for file in sorted(src.folder.glob("*.safetensors")):
            with safe_open(str(file), framework="pt") as f:
                found.update({k: f.get_tensor(k) for k in names if k in f.keys()})
    missing = [n for n in names if n not in found]
    if missing:
        where = "a GGUF file keeps no reward head" if src.gguf_file else f"no tensor {missing[0]}"
        raise ModelError(
            f"{src.folder / (src.gguf_file or '')}: {where}; the {fmt} format reads the "
            "checkpoint's reward head: not a checkpoint of that format (choose the --prm-format "
            "it was trained with)"
        )
    return found


def _head_readout(fmt: str, tensors: dict[str, Any], hidden: int, device: Any) -> Readout:
    torch = import_torch()
    nn = torch.nn
    if fmt == "qwen-prm":
        module = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 2))
        prefix, last = "score.", lambda out: torch.softmax(out, dim=-1)[:, 1]
    else:
        module = nn.Sequential(nn.Linear(hidden, 1))
        prefix, last = "v_head.summary.", lambda out: torch.sigmoid(out[:, 0])
    state = {
        k[len(prefix) :] if fmt == "qwen-prm" else "0." + k[len(prefix) :]: v
        for k, v in tensors.items()
    }
    try:
        module.load_state_dict(state)
    except RuntimeError as e:
        raise ModelError(
            f"the {fmt} reward head does not fit the backbone ({_first_line(e)})"
        ) from None
    module = module.to(device=device, dtype=torch.float32).eval()
    return lambda h: last(module(h.float())).tolist()


def _logit_readout(model: Any, tokenizer: Any, fmt: str) -> Readout:
    from edgereason.backends.prm_format import PRM_FORMATS

    torch = import_torch()
    spec = PRM_FORMATS[fmt]
    # the first token of each label, as the llama.cpp verifier reads it (Math-Shepherd's "+"/"-"
    # with their space on a SentencePiece vocabulary, as its own `encode("+ -")[1:]` does)
    ids = [tokenizer.encode(t, add_special_tokens=False)[0] for t in (spec.good, spec.bad)]
    lm_head = model.get_output_embeddings()

    def read(h: Any) -> list[float]:
        pair = lm_head(h)[:, ids].float()
        return torch.softmax(pair, dim=-1)[:, 0].tolist()  # P(good) against P(bad)

    return read


def load_checkpoint(
    path: Path,
    fmt: str,
    device: str = "auto",
    head: ValueHead | None = None,
    n_threads: int | None = None,
) -> Checkpoint:
    """The backbone, tokenizer and readout `fmt` needs from the checkpoint at `path` (folder or
    .gguf)."""
    torch = import_torch()
    import transformers

    torch_device, dtype = resolve_device(device)
    if n_threads and torch_device.type == "cpu":
        torch.set_num_threads(n_threads)
    src = source(path)
    own_code = _needs_own_code(src)
    if own_code:
        print(
            f"edgereason: running the checkpoint's own model code from {src.folder} (its model "
            f"type is unknown to transformers {transformers.__version__})",
            file=sys.stderr,
        )
    head_tensors = _head_tensors(src, HEAD_TENSORS[fmt], fmt) if fmt in HEAD_TENSORS else {}
    if fmt == "head":
        check_head_runs_here(head)
    tokenizer, model = _load_quietly(path, src, fmt, dtype, own_code)
    model = model.to(torch_device).eval()
    backbone = model.base_model if fmt in LOGIT_FORMATS | {"head"} else model
    hidden = backbone.config.get_text_config(decoder=True).hidden_size
    if fmt in LOGIT_FORMATS:
        readout = _logit_readout(model, tokenizer, fmt)
    elif fmt == "head":
        assert head is not None
        readout = _checked_value_head_readout(path, src, model, head)
    else:
        readout = _head_readout(fmt, head_tensors, hidden, torch_device)
    return Checkpoint(
        Path(path), backbone, tokenizer, readout, backbone.config, torch_device, dtype
    )


def _load_quietly(path: Path, src: Source, fmt: str, dtype: Any, own_code: bool) -> tuple[Any, Any]:
    """The tokenizer and model of `src`, with transformers' logging and progress bars held down
    meanwhile."""
    import transformers
    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

    verbosity, bars = (
        transformers.logging.get_verbosity(),
        transformers.logging.is_progress_bar_enabled(),
    )
    # a head checkpoint loaded as its backbone lists the head's keys
    transformers.logging.set_verbosity_error()
    # "Loading weights" bars would interleave with the search's output
    transformers.logging.disable_progress_bar()
    try:
        config = load_config(path)  # once: reading a GGUF's metadata takes seconds
        tokenizer = AutoTokenizer.from_pretrained(
            src.folder, config=config, trust_remote_code=own_code, **src.kwargs
        )
        auto = AutoModelForCausalLM if fmt in LOGIT_FORMATS | {"head"} else AutoModel
        model = auto.from_pretrained(
            src.folder, config=config, dtype=dtype, trust_remote_code=own_code, **src.kwargs
        )
    except (OSError, ValueError, KeyError, ImportError) as e:
        raise ModelError(
            f"{path}: transformers cannot load it as a {fmt} PRM ({_first_line(e)})"
        ) from None
    finally:
        transformers.logging.set_verbosity(verbosity)
        if bars:
            transformers.logging.enable_progress_bar()
    return tokenizer, model


def _checked_value_head_readout(path: Path, src: Source, model: Any, head: ValueHead) -> Readout:
    """The head's readout, once the checkpoint is the GGUF the head was trained on."""
    if not src.gguf_file:  # a head names its backbone by the GGUF's sha256
        raise ConfigError(
            f"a value head reads the GGUF it was trained on ({head.backbone.file}); pass --prm "
            "hf:PATH.gguf, not a folder"
        )
    head.check_backbone(Path(path), model.config.get_text_config(decoder=True).vocab_size)
    return value_head_readout(model, head)
