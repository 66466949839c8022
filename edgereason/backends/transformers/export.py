"""A GGUF written out as a Hugging Face folder (`edgereason models export NAME --format hf DIR`),
for servers that read those (vLLM, SGLang, transformers) and for `--model hf:DIR` on the torch
backend.

transformers' GGUF loader reads the file: its config, its tokenizer and chat template
(tokenizer.chat_template), and its weights dequantized to float32 and cast to the dtype asked for.
The folder gets the safetensors, config.json, generation_config.json, tokenizer.json and
tokenizer_config.json (with the chat template). generation_config's EOS ids are the tokens llama.cpp
ends a turn at (the torch tokenizer's rule: the EOS and the end-of-turn control tokens, <|im_end|>
for ChatML; not llama.cpp's fill-in-the-middle ones), so a server stops where llama.cpp does in a
chat.

A server may run transformers 4, which reads neither what transformers 5 names the rope
(`rope_parameters`) and the dtype (`dtype`) in config.json nor its tokenizer class
(`TokenizersBackend`): without rope_theta it would compute the rope with 10000 and answer nonsense.
So config.json also gets the older keys (rope_theta, rope_scaling, torch_dtype), the tokenizer is
saved as PreTrainedTokenizerFast (tokenizer.json read as it is, by either version) and the chat
template goes into tokenizer_config.json, where every version reads it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from edgereason.backends.vocabulary import END_OF_TURN
from edgereason.errors import ConfigError, ModelError

DTYPES = ("bfloat16", "float16", "float32")
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
LIBRARIES = ("torch", "transformers", "gguf")
INSTALL = 'pip install "edgereason[torch]"'

Note = Callable[[str], None]  # a progress line for the user


def require_libraries() -> None:
    """One ConfigError line where torch, transformers or gguf is missing, or torch cannot join this
    process."""
    import importlib

    from edgereason.backends.cxx_runtime import require_one_cxx_runtime

    require_one_cxx_runtime(
        "models export loads torch into this process", "export where llama.cpp is a CPU build"
    )
    missing = []
    for name in LIBRARIES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise ConfigError(
            f"models export needs {', '.join(missing)}, which {verb} not installed: {INSTALL}"
        )


def end_of_turn_ids(tokenizer: Any) -> list[int]:
    """The EOS and the end-of-turn control tokens (END_OF_TURN), the ids HFTokenizer ends generation
    at."""
    ids = {
        i
        for i, token in tokenizer.added_tokens_decoder.items()
        if token.special and token.content in END_OF_TURN
    }
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return sorted(ids)


@contextmanager
def _warnings_held_down() -> Iterator[None]:
    """transformers' warnings held down (a GGUF's keys it does not parse); its progress bars stay,
    on stderr."""
    import transformers

    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers.logging.set_verbosity(verbosity)


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _unreadable(gguf: Path, e: BaseException) -> ModelError:
    import transformers

    return ModelError(
        f"transformers {transformers.__version__} cannot read {gguf} ({_first_line(e)}); llama.cpp "
        "runs it as it is"
    )


def read_config(gguf: Path) -> Any:
    """The GGUF's model config as transformers reads it (metadata only, no weights), or one
    ModelError line where its GGUF loader does not read the architecture."""
    from transformers import AutoConfig

    with _warnings_held_down():
        try:
            return AutoConfig.from_pretrained(
                gguf.parent, gguf_file=gguf.name, local_files_only=True
            )
        except (OSError, ValueError, KeyError) as e:
            raise _unreadable(gguf, e) from None


def _load(gguf: Path, config: Any, dtype: str) -> tuple[Any, Any]:
    """The tokenizer and the dequantized model."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    source = {"config": config, "gguf_file": gguf.name, "local_files_only": True}
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **source)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent,
            dtype=getattr(torch, dtype),
            # plain tensors, never GGUF blocks kept packed
            quantization_config=GgufConfig(dequantize=True),
            **source,
        )
    except (OSError, ValueError, KeyError, NotImplementedError) as e:
        raise _unreadable(gguf, e) from None
    model.hf_quantizer = None  # dequantized: saved as a plain float checkpoint
    model.config.__dict__.pop("quantization_config", None)
    return tokenizer, model


def write_hf_folder(
    gguf: Path,
    folder: Path,
    dtype: str = "bfloat16",
    note: Note | None = None,
    max_shard_size: str = "50GB",
    config: Any = None,
) -> str:
    """Write the GGUF's model into `folder` (an existing empty folder) as a Hugging Face checkpoint
    in `dtype`; its architecture (config.json's model_type). `note` gets a line at each stage;
    `config`: read_config's, where the caller has it (reading it takes seconds for a large
    vocabulary)."""
    if dtype not in DTYPES:
        raise ConfigError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    note = note or (lambda line: None)
    config = config if config is not None else read_config(gguf)
    note(f"reading the tokenizer and dequantizing the weights to {dtype}")
    with _warnings_held_down():
        tokenizer, model = _load(gguf, config, dtype)
        model.generation_config.eos_token_id = end_of_turn_ids(tokenizer)
        model.generation_config._from_model_config = False  # set here, not copied from config.json
        if not tokenizer.chat_template:
            note(
                f"{gguf.name} has no chat template: a server needs one given (vLLM's "
                "--chat-template)"
            )
        note("writing the weights, config and tokenizer")
        model.save_pretrained(folder, max_shard_size=max_shard_size)
        tokenizer.save_pretrained(folder, save_jinja_files=False)
    _edit_json(folder / "config.json", _with_older_keys)
    _edit_json(folder / "tokenizer_config.json", _portable_tokenizer)
    return str(model.config.model_type)


def _edit_json(path: Path, edit: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    path.write_text(
        json.dumps(edit(json.loads(path.read_text(encoding="utf-8"))), indent=2) + "\n",
        encoding="utf-8",
    )


def _with_older_keys(config: dict[str, Any]) -> dict[str, Any]:
    """config.json with the keys transformers 4 reads beside transformers 5's (see the module
    doc)."""
    rope = dict(config.get("rope_parameters") or {})
    # one rope for every layer (llama, qwen2); a per-layer-type rope has no older form
    if "rope_theta" in rope:
        config["rope_theta"] = rope.pop("rope_theta")
        config["rope_scaling"] = rope if rope.get("rope_type", "default") != "default" else None
    config.setdefault("torch_dtype", config.get("dtype"))
    return config


def _portable_tokenizer(settings: dict[str, Any]) -> dict[str, Any]:
    """tokenizer_config.json naming the class both versions read tokenizer.json with, without the
    load options transformers 5 saves (local_files_only would hold for whoever loads the folder)."""
    settings["tokenizer_class"] = "PreTrainedTokenizerFast"
    for key in ("is_local", "local_files_only"):
        settings.pop(key, None)
    return settings
