"""Which attention a decode pass of the CUDA graphs runs, by name: found by detection, or forced by
EDGEREASON_ATTENTION so that one process can measure each beside the others.

- `sdpa-gathered` (attention.py): every row's cells gathered into a padded copy, one masked SDPA
  call. Runs everywhere; what prefills and eager passes always run.
- `triton-paged` (paged_decode.py): a Triton kernel reads each row's cells through its table from
  the cache in place. Needs Triton and CUDA and a head size that is a power of two; the default
  there, but for `solve`, one search a process (one_search.py says why). Forced, it also runs in
  Triton's interpreter (TRITON_INTERPRET=1) on CPU tensors: the tests.

No `flash-varlen`: torch's FlashAttention (`varlen_attn`'s `block_table`, the flash op's
`block_table`) reads pages of 256 tokens or a multiple (its port of FlashAttention-2 checks
`page_block_size % 256 == 0`), and this cache's pages are one token (kv.py says why). Its
`seqused_k` alone needs each sequence's keys contiguous: the gather again. `installed_torch` says
what the installed torch has."""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from importlib import metadata

import torch

from edgereason.backends.torch import paged_decode
from edgereason.backends.torch.gguf_weights import ModelConfig
from edgereason.backends.torch.one_search import ONE_SEARCH_ATTENTION, SWITCH
from edgereason.errors import ConfigError

GATHERED, PAGED = ONE_SEARCH_ATTENTION, "triton-paged"  # one_search.py names one without torch

_noted: set[tuple[str, str]] = set()  # (kind, why it could not run), said once a process
_probed: dict[tuple, str] = {}  # the paged kernel's check by device and shape: why it failed, or ""


def _gathered_blocked(device: torch.device, head_dim: int) -> str | None:
    return None


def _paged_blocked(device: torch.device, head_dim: int) -> str | None:
    """Why the Triton kernel cannot run here, or None."""
    if importlib.util.find_spec("triton") is None:
        return "Triton is not installed"
    if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        return "it needs CUDA"
    if head_dim < 16 or head_dim & (head_dim - 1):
        return f"its head size {head_dim} is not a power of two of 16 or more"
    return None


# name -> why it cannot run on (device, head size), None where it can
KINDS: dict[str, Callable[[torch.device, int], str | None]] = {
    GATHERED: _gathered_blocked,
    PAGED: _paged_blocked,
}


def decode_kind(device: torch.device, cfg: ModelConfig, dtype: torch.dtype) -> str:
    """The attention a decode pass of a model of `cfg` in `dtype` runs: EDGEREASON_ATTENTION's
    where set, else the paged kernel on CUDA (Triton's interpreter serves the tests, never a user's
    passes), else the gathered SDPA. The paged kernel first passes a check against the gathered
    SDPA, once a process and shape (a graph's warm-up pass chooses before its capture). A kind that
    cannot run, or fails its check, is said once and the gathered SDPA runs."""
    forced = os.environ.get(SWITCH, "").strip()
    if forced and forced not in KINDS:
        raise ConfigError(f"{SWITCH}={forced!r}: set it to one of {', '.join(KINDS)} or unset it")
    kind = forced or (PAGED if device.type == "cuda" else GATHERED)
    blocked = KINDS[kind](device, cfg.head_dim)
    if blocked is None and kind == PAGED:
        blocked = _checked(device, cfg, dtype) or None
    if blocked is None:
        return kind
    if (kind, blocked) not in _noted and (forced or "Triton is not installed" not in blocked):
        _noted.add((kind, blocked))
        print(
            f"edgereason: {kind} cannot run here ({blocked}); decode passes attend with {GATHERED}",
            file=sys.stderr,
        )
    return GATHERED


def _checked(device: torch.device, cfg: ModelConfig, dtype: torch.dtype) -> str:
    """paged_decode.probe's verdict ("" where it passed), once a process for a device and shape."""
    key = (device, cfg.n_head, cfg.n_head_kv, cfg.head_dim, dtype)
    if key not in _probed:
        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            return "first chosen while a CUDA graph recorded"
        _probed[key] = paged_decode.probe(*key)
    return _probed[key]


def installed_torch() -> dict[str, str]:
    """What the installed torch offers for attention over paged KV: varlen_attn's parameters and
    the flash op's schema (block_table and seqused_k in them, or not)."""
    try:
        from torch.nn.attention.varlen import varlen_attn

        varlen = str(inspect.signature(varlen_attn))
    except ImportError:
        varlen = "absent"
    flash = getattr(torch.ops.aten, "_flash_attention_forward", None)
    return {
        "torch": torch.__version__,
        "varlen_attn": varlen,
        "flash_attention_forward": str(flash.default._schema) if flash is not None else "absent",
        "triton": _version("triton"),
    }


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"
