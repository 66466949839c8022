"""torch backend: a Generator and a Verifier on CUDA (bf16 weights dequantized from the GGUF, or
read from a Hugging Face folder's safetensors: `--model hf:FOLDER`; KV in device memory, decode
passes replayed as CUDA graphs, sampling on the device); backend.py puts it behind the one interface
(TorchBackend). Every function taking a model path takes either.

Without CUDA (`--backend torch` on a CPU, or a torch build without CUDA) it runs on the CPU in
float32 and says so: that is what the CPU tests check it with; llama.cpp is the faster CPU backend.

This module imports without torch (the modules it opens lazily need it): `import_torch` is where a
missing torch becomes one ConfigError line. Nor does it need llama-cpp-python: only a GGUF's
tokenizer is read through it (weight_sources.py), and a Hugging Face folder runs without it."""

from __future__ import annotations

import gc
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from edgereason.backends.interface import Placement
from edgereason.errors import ConfigError, OutOfMemoryError
from edgereason.util.startup import phase

INSTALL = 'pip install "edgereason[torch]"'
# sequence ids one context hands out at once: as llama.cpp's, the beams one search can have
SEQ_SLOTS = 256


def import_torch() -> Any:
    """torch, or one ConfigError line: not installed, or unable to join this process beside
    llama.cpp."""
    from edgereason.backends.cxx_runtime import require_one_cxx_runtime

    require_one_cxx_runtime(
        "the torch backend loads torch into this process", "use --backend llamacpp"
    )
    try:
        with phase("import"):
            import gguf  # noqa: F401
            import torch
    except ImportError:
        raise ConfigError(
            f"--backend torch needs torch and gguf, which are not installed: {INSTALL}"
        ) from None
    return torch


def supports_gpu() -> bool:
    return bool(import_torch().cuda.is_available())


def no_cuda() -> str:
    torch = import_torch()
    build = (
        "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
    )
    return f"torch {torch.__version__} ({build}) sees no CUDA device"


def device_for(n_gpu_layers: int) -> str:
    """cuda when layers go on a GPU (all of them: torch runs the whole model on one device), else
    cpu."""
    return "cuda" if n_gpu_layers else "cpu"


def open_model(path: Path, place: Placement):
    """The GGUF's TorchModel on the device the layers name, with the weights asked for (one per
    file, device and weights, shared by both roles)."""
    torch = import_torch()
    from edgereason.backends.torch.model import load_model

    device = device_for(place.n_gpu_layers)
    if device == "cpu":
        if place.n_threads:
            torch.set_num_threads(place.n_threads)
        _note_cpu()
    try:
        return load_model(str(path), device, place.torch_weights)
    except torch.OutOfMemoryError:
        raise OutOfMemoryError(_no_room_for_weights(torch, path, place.torch_weights)) from None


def _gib(n_bytes: int) -> str:
    return f"{n_bytes / 2**30:.1f} GiB"


def _no_room_for_weights(torch: Any, path: Path, asked: str | None) -> str:
    """What did not fit and what to do: the weights as they load (asked: --torch-weights), in bf16
    several times the GGUF's size."""
    from edgereason.backends.torch.int4_choice import weights_kind

    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    needs, kind = _gib(weights_bytes(path, 1, asked)), weights_kind("cuda", asked)
    return (
        f"{path.name} needs {needs} in {kind} on torch, more than the GPU's "
        f"{_gib(free)} free of {_gib(total)}; free GPU memory, or use --backend llamacpp, which "
        "keeps the weights quantized"
    )


_cpu_noted = False


def _note_cpu() -> None:
    global _cpu_noted
    if not _cpu_noted:
        why = no_cuda() if not supports_gpu() else "--gpu-layers 0"
        print(
            f"edgereason: the torch backend runs on the CPU in float32 ({why}); llama.cpp is the "
            "faster CPU backend",
            file=sys.stderr,
        )
        _cpu_noted = True


@lru_cache(maxsize=4)
def weights_table(path: str):
    """The GGUF's or the folder's tensor table and metadata (no weights read): read once, as a
    session asks several times."""
    import_torch()
    from edgereason.backends.torch.weight_sources import open_weights

    return open_weights(Path(path))


def weights_bytes(path: Path, n_gpu_layers: int = 0, asked: str | None = None) -> int:
    """The bytes the weights take on the device (bf16 on CUDA, float32 on the CPU; with int4
    weights (asked: --torch-weights) the 4-bit matrices at 0.625 bytes a weight)."""
    torch = import_torch()
    from edgereason.backends.torch.int4_choice import weights_kind
    from edgereason.backends.torch.int4_layers import int4_bytes
    from edgereason.backends.torch.model import device_dtype

    device = device_for(n_gpu_layers)
    size = torch.tensor([], dtype=device_dtype(torch.device(device))).element_size()
    table = weights_table(str(path))
    gguf = table.gguf if weights_kind(device, asked) == "int4" else None
    return size * table.n_elements() if gguf is None else int4_bytes(gguf, size)


# the caches that keep a model's weights (its adapted copy, its file's layout) alive, by module;
# compiled_layers' compiled block keeps none (the weights are its arguments)
_MODEL_CACHES = {
    "edgereason.backends.torch.model": ("_load_model", "load_decoder"),
    "edgereason.backends.torch.lora": ("with_adapter",),
    "edgereason.backends.torch.gguf_weights": ("_read_layout",),
}


def forget_loaded_models() -> None:
    """Free the models this process keeps loaded: a later load reads them again."""
    weights_table.cache_clear()
    for name, caches in _MODEL_CACHES.items():
        module = sys.modules.get(name)  # never imported: it holds nothing, and needs no torch
        for cache in caches if module else ():
            getattr(module, cache).cache_clear()
    gc.collect()


__all__ = [
    "SEQ_SLOTS",
    "forget_loaded_models",
    "import_torch",
    "open_model",
    "supports_gpu",
    "weights_bytes",
    "weights_table",
]
