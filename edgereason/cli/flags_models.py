"""The model, runtime and memory flags of solve, chat and bench."""

from __future__ import annotations

import argparse

from edgereason import models
from edgereason.cli.flags_remote import add_remote_args
from edgereason.search.recipes import describe
from edgereason.session.gpu import DEVICE_SAMPLING_MODES
from edgereason.session.prm_choice import PRM_FORMAT_CHOICES
from edgereason.session.settings import DEFAULT_KV_TOKENS, DEFAULT_TOP_K, SPLITS

# solve's and bench's: where llama.cpp runs on the CPU (session/cpu_threads.py)
THREADS_DEFAULT = "the physical cores other processes leave free at start"


def add_model_args(p: argparse.ArgumentParser, threads_default: str = THREADS_DEFAULT) -> None:
    g = p.add_argument_group("models")
    _add_weight_flags(g)
    _add_device_flags(g, threads_default)
    _add_kv_flags(g)
    add_remote_args(p)  # its group follows "models" in --help; --verbose still joins "models", last
    g.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="start-up notes (such as a missing memory profile) on every run, not once per device "
        "and model pair",
    )


def _add_weight_flags(g: argparse._ArgumentGroup) -> None:
    """The generator and the PRM: which weights, and how the PRM is read."""
    g.add_argument(
        "--model",
        default=models.DEFAULT_MODEL,
        help=f"generator: a registry name ({', '.join(models.REGISTRY)}), a .gguf path, or "
        "hf:FOLDER, a Hugging Face folder run on the torch backend (default "
        f"{models.DEFAULT_MODEL})",
    )
    g.add_argument(
        "--prm",
        default=None,
        metavar="NAME|PATH|self",
        help="PRM weights: a registry name, a .gguf path, self = the generator's own, or hf:PATH "
        "= a Hugging Face folder (or a .gguf) on torch (default self; solve and chat: the "
        f"generator's recipe, {describe('prm')})",
    )
    g.add_argument(
        "--prm-format",
        default="auto",
        choices=PRM_FORMAT_CHOICES,
        help="how the PRM is read: head = a trained value head on its hidden states, judge = asks "
        "it Yes/No, rlhflow = +/- turns; auto = head where one is given or ships for the PRM "
        "model, else judge (default auto)",
    )
    g.add_argument(
        "--prm-head",
        default=None,
        metavar="FILE",
        help="value head (.safetensors with its .json) for --prm-format head; made by "
        "edgereason train-prm, or a shipped head's name: qwen2.5-coder-1.5b-lora, the 1.5B's "
        "fine-tuned verifier (+7.5 points in its beam search, an extra PRM pass a step) "
        "(default: the one that ships for the PRM model)",
    )
    g.add_argument(
        "--prm-device",
        default="auto",
        choices=["auto", "cpu", "cuda"],
        help="where an hf: PRM runs on torch (--prm hf:FOLDER|FILE.gguf, formats qwen-prm, "
        "skywork, math-shepherd, rlhflow, judge, head): auto = CUDA when torch sees one (default "
        "auto)",
    )


def _add_device_flags(g: argparse._ArgumentGroup, threads_default: str) -> None:
    """CPU threads, GPU layers and memory, and sampling on the device."""
    g.add_argument(
        "--threads", type=int, default=None, help=f"CPU threads (default: {threads_default})"
    )
    g.add_argument(
        "--gpu-layers",
        type=int,
        default=None,
        metavar="N",
        help="layers to offload to the GPU, 999 = all (default: all with a CUDA build of "
        "llama-cpp-python and a GPU present, else 0)",
    )
    g.add_argument(
        "--gpu-memory",
        default=None,
        metavar="SIZE",
        help="most GPU memory the engine may use, weights and KV together, e.g. 24GiB; without "
        "--kv-budget the KV caches get what the weights leave (default: no cap, the whole free "
        "memory; an error without layers on a GPU)",
    )
    g.add_argument(
        "--device-sampling",
        default="auto",
        choices=DEVICE_SAMPLING_MODES,
        help="cut each row to its top --device-top-k tokens on the device and sample over those on "
        "the host; auto = on where layers are on a GPU (default auto)",
    )
    g.add_argument(
        "--device-top-k",
        type=int,
        default=DEFAULT_TOP_K,
        metavar="K",
        help=f"candidates kept per row by device sampling (default {DEFAULT_TOP_K})",
    )
    g.add_argument(
        "--torch-weights",
        default=None,
        choices=("bf16", "int4"),
        help="the torch backend's layer weights: bf16, or int4 = the GGUF's 4-bit matrices (Q4_0, "
        "Q4_1, Q4_K) kept 4-bit, the rest bf16 (default: $EDGEREASON_TORCH_WEIGHTS, else int4 on a "
        "card under 1.5 TB/s, bf16 elsewhere)",
    )


def _add_kv_flags(g: argparse._ArgumentGroup) -> None:
    """The KV caches: their size, the budget's split between the models, and flash attention."""
    g.add_argument(
        "--kv-tokens",
        type=int,
        default=DEFAULT_KV_TOKENS,
        help=f"KV cache tokens per model (default {DEFAULT_KV_TOKENS})",
    )
    g.add_argument(
        "--kv-budget",
        default=None,
        metavar="SIZE",
        help="KV memory of both models together, e.g. 24MiB or 1GiB (overrides --kv-tokens)",
    )
    g.add_argument(
        "--flash-attn",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="flash attention: much faster once many KV cells are in use; --no-flash-attn makes "
        "incremental PRM scoring bit-exact (default on)",
    )
    g.add_argument(
        "--split",
        default="profile",
        choices=SPLITS,
        help="how --kv-budget is split: by this device's memory profile, or evenly (default "
        "profile)",
    )
