"""Which attention a decode pass of the CUDA graphs runs, by name: found by detection, or forced by
EDGEREASON_ATTENTION so that one process can measure each beside the others.

- `sdpa-gathered` (attention.py): every row's cells gathered into a padded copy, one masked SDPA
  call. Runs everywhere; what prefills and eager passes always run.
- `triton-paged` (paged_decode.py): a Triton kernel reads each row's cells through its table from
  the cache in place. Needs Triton and CUDA and a head size that is a power of two; the default
  there. Forced, it also runs in Triton's interpreter (TRITON_INTERPRET=1) on CPU tensors: the
  tests.

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

from edgereason.errors import ConfigError

SWITCH = "EDGEREASON_ATTENTION"
GATHERED, PAGED = "sdpa-gathered", "triton-paged"

_noted: set[str] = set()  # forced kinds that could not run, said once a process


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


def decode_kind(device: torch.device, head_dim: int) -> str:
    """The attention a decode pass runs: EDGEREASON_ATTENTION's where set and able to run (else
    the gathered SDPA, said once), else the paged kernel where it runs, else the gathered SDPA."""
    forced = os.environ.get(SWITCH, "").strip()
    if forced and forced not in KINDS:
        raise ConfigError(f"{SWITCH}={forced!r}: set it to one of {', '.join(KINDS)} or unset it")
    if not forced:  # Triton's interpreter serves the tests, never a user's passes
        return (
            PAGED
            if device.type == "cuda" and _paged_blocked(device, head_dim) is None
            else GATHERED
        )
    blocked = KINDS[forced](device, head_dim)
    if blocked is None:
        return forced
    if forced not in _noted:
        _noted.add(forced)
        print(
            f"edgereason: {SWITCH}={forced} cannot run here ({blocked}); decode passes attend "
            f"with {GATHERED}",
            file=sys.stderr,
        )
    return GATHERED


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
