"""The torch backend's tokenizer and chat template (backends/vocabulary.py's `Tokenizer`): a GGUF's
own vocabulary through llama.cpp's library (backends/llama_vocab.py: both backends tokenize alike),
or a Hugging Face folder's tokenizer through transformers (`HFTokenizer`, offline), kept to
llama.cpp's conventions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from edgereason.backends.vocabulary import END_OF_TURN
from edgereason.errors import ConfigError, ModelError
from edgereason.prompts import literal_spans

_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # a SentencePiece byte-fallback token


def byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level alphabet: the character a byte-level BPE token spells each byte with ->
    the byte."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    alphabet, shifted = {}, 0
    for byte in range(256):
        if byte in printable:
            alphabet[chr(byte)] = byte
        else:
            alphabet[chr(256 + shifted)] = byte
            shifted += 1
    return alphabet


def _auto_tokenizer(folder: Path) -> Any:
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ConfigError(
            "a Hugging Face folder on the torch backend needs transformers: pip install "
            '"edgereason[torch]"'
        ) from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError, KeyError) as e:
        raise ModelError(
            f"{folder}: no tokenizer transformers can load ({str(e).splitlines()[0]})"
        ) from None
    if getattr(tokenizer, "backend_tokenizer", None) is None:
        raise ModelError(
            f"{folder}: the torch backend reads a fast tokenizer (tokenizer.json), and it has none"
        )
    return tokenizer


def _decoder_types(decoder: dict[str, Any] | None) -> set[str]:
    if not decoder:
        return set()
    return {decoder["type"]} | {t for d in decoder.get("decoders", []) for t in _decoder_types(d)}


class HFTokenizer:
    """A Hugging Face folder's tokenizer and chat template (see the module doc)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder
        self.hf = _auto_tokenizer(folder)
        self.bos_id: int | None = self.hf.bos_token_id
        plain = self.hf.encode("a", add_special_tokens=False)
        self.add_bos = self.bos_id is not None and self.hf.encode("a") == [self.bos_id, *plain]
        added = self.hf.added_tokens_decoder
        self.control_ids = frozenset(self.hf.all_special_ids) | {
            i for i, t in added.items() if t.special
        }
        self._added = {i: t.content for i, t in added.items()}
        self.eog_ids = self._end_ids(folder)
        decoders = _decoder_types(json.loads(self.hf.backend_tokenizer.to_str()).get("decoder"))
        self._alphabet = byte_level_alphabet() if "ByteLevel" in decoders else None
        self._pieces: dict[int, bytes] = {}

    def _end_ids(self, folder: Path) -> frozenset[int]:
        """The EOS ids of the tokenizer and generation_config.json, and the end-of-turn control
        tokens."""
        ids = {self.hf.eos_token_id}
        try:
            named = json.loads((folder / "generation_config.json").read_text(encoding="utf-8")).get(
                "eos_token_id"
            )
        except (OSError, ValueError):
            named = None
        ids |= set(named) if isinstance(named, list) else {named}
        ids |= {
            i for i, text in self._added.items() if text in END_OF_TURN and i in self.control_ids
        }
        return frozenset(i for i in ids if isinstance(i, int))

    def tokenize(self, text: str, add_bos: bool = False, special: bool = True) -> list[int]:
        ids = [
            i
            for piece, is_literal in literal_spans(text)
            for i in self.hf.encode(
                piece, add_special_tokens=False, split_special_tokens=is_literal or not special
            )
        ]
        if add_bos and self.bos_id is not None and ids[:1] != [self.bos_id]:
            ids.insert(0, self.bos_id)
        return ids

    def token_piece(self, token: int) -> bytes:
        piece = self._pieces.get(token)
        if piece is None:
            piece = self._pieces[token] = self._piece(token)
        return piece

    def _piece(self, token: int) -> bytes:
        if token in self.control_ids or not 0 <= token < len(self.hf):
            return b""  # a control token, or a row of a padded embedding
        if token in self._added:
            return self._added[token].encode("utf-8")  # added tokens hold their text as it is
        text = self.hf.convert_ids_to_tokens(token)
        if self._alphabet is not None:
            return bytes(self._alphabet[c] for c in text)
        byte = _BYTE_TOKEN.fullmatch(text)
        return (
            bytes([int(byte.group(1), 16)]) if byte else text.replace("\u2581", " ").encode("utf-8")
        )

    def detokenize(self, ids: Iterable[int]) -> str:
        return b"".join(self.token_piece(t) for t in ids).decode("utf-8", errors="replace")

    def apply_chat_template(
        self, messages: Sequence[dict[str, str]], add_assistant: bool = True
    ) -> str:
        if not self.hf.chat_template:
            raise ModelError(
                f"{self.path.name} has no chat template; EdgeReason needs an instruct model"
            )
        from jinja2 import TemplateError

        try:
            return self.hf.apply_chat_template(
                list(messages), tokenize=False, add_generation_prompt=add_assistant
            )
        except TemplateError as e:
            raise ModelError(f"{self.path.name}: its chat template failed ({e})") from None
