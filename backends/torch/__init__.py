"""torch backend: a Generator and a Verifier on CUDA (bf16 weights dequantized from the GGUF, KV in device memory,
decode passes replayed as CUDA graphs, sampling on the device), with the llama.cpp backend's interface.

Without CUDA (`--backend torch` on a CPU, or a torch build without CUDA) it runs on the CPU in float32 and says so:
that is what the CPU tests check it with; llama.cpp is the faster CPU backend.

This module imports without torch (the modules it opens lazily need it): `import_torch` is where a missing torch
becomes one ConfigError line. memory-profile measures the models through `profiled_generator` and `profiled_prm`
(profiling.py).
"""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from edgereason.backends.prm_format import prm_format
from edgereason.errors import ConfigError
from edgereason.heads.value_head import ValueHead
from edgereason.protocols import Points, ProfiledGenerator, ProfiledPRM

INSTALL = 'pip install "edgereason[torch]"'
SEQ_SLOTS = 256  # sequence ids one context hands out at once: as llama.cpp's, the beams one search can have


def import_torch() -> Any:
    """torch, or one ConfigError line: not installed, or unable to join this process beside llama.cpp."""
    from edgereason.backends.llamacpp.cxx_runtime import require_one_cxx_runtime

    require_one_cxx_runtime("the torch backend loads torch into this process", "use --backend llamacpp")
    try:
        import gguf  # noqa: F401
        import torch
    except ImportError:
        raise ConfigError(f"--backend torch needs torch and gguf, which are not installed: {INSTALL}") from None
    return torch


def supports_gpu() -> bool:
    return bool(import_torch().cuda.is_available())


def no_cuda() -> str:
    torch = import_torch()
    build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
    return f"torch {torch.__version__} ({build}) sees no CUDA device"


def require_gpu(instead: str) -> None:
    """ConfigError unless torch sees a CUDA device; `instead` says what the user can do otherwise."""
    if not supports_gpu():
        raise ConfigError(f"{no_cuda()}; {instead}")


def device_for(n_gpu_layers: int) -> str:
    """cuda when layers go on a GPU (all of them: torch runs the whole model on one device), else cpu."""
    return "cuda" if n_gpu_layers else "cpu"


def open_model(path: Path, n_gpu_layers: int, n_threads: int | None):
    """The GGUF's TorchModel on the device the layers name (one per file and device, shared by both roles)."""
    torch = import_torch()
    from edgereason.backends.torch.model import load_model

    device = device_for(n_gpu_layers)
    if device == "cpu":
        if n_threads:
            torch.set_num_threads(n_threads)
        _note_cpu()
    return load_model(str(path), device)


_cpu_noted = False


def _note_cpu() -> None:
    global _cpu_noted
    if not _cpu_noted:
        why = no_cuda() if not supports_gpu() else "--gpu-layers 0"
        print(
            f"edgereason: the torch backend runs on the CPU in float32 ({why}); llama.cpp is the faster CPU backend",
            file=sys.stderr,
        )
        _cpu_noted = True


def open_models(
    generator_path: Path,
    prm_path: Path,
    prm_format_name: str,
    generator_kv_tokens: int,
    verifier_kv_tokens: int,
    n_threads: int | None = None,
    n_gpu_layers: int = 0,
    flash_attn: bool = True,
    head: ValueHead | None = None,
    device_top_k: int = 0,
):
    """The llama.cpp backend's signature; flash_attn and device_top_k do not apply (attention is torch's SDPA and
    sampling runs on the device over whole rows)."""
    from edgereason.backends.torch.generator import TorchGenerator
    from edgereason.backends.torch.verifier import TorchVerifier

    generator = TorchGenerator(open_model(generator_path, n_gpu_layers, n_threads), generator_kv_tokens)
    verifier = TorchVerifier(
        open_model(prm_path, n_gpu_layers, n_threads), prm_format(prm_format_name), verifier_kv_tokens, head=head
    )
    return generator, verifier


def open_generator(
    generator_path: Path,
    generator_kv_tokens: int,
    n_threads: int | None = None,
    n_gpu_layers: int = 0,
    flash_attn: bool = True,
    device_top_k: int = 0,
):
    from edgereason.backends.torch.generator import TorchGenerator

    return TorchGenerator(open_model(generator_path, n_gpu_layers, n_threads), generator_kv_tokens)


def profiled_generator(path: Path, n_gpu_layers: int, n_threads: int | None) -> ProfiledGenerator:
    """The generator as memory-profile measures it (profiling.py)."""
    import_torch()  # before profiling.py imports it
    from edgereason.backends.torch.profiling import profiled_generator as make

    return make(path, n_gpu_layers, n_threads)


def profiled_prm(
    path: Path, same_as_generator: bool, fmt: str, head: ValueHead | None, n_gpu_layers: int, n_threads: int | None
) -> ProfiledPRM:
    """The PRM as memory-profile measures it (profiling.py); same_as_generator: its weights are counted there."""
    import_torch()
    from edgereason.backends.torch.profiling import profiled_prm as make

    return make(path, same_as_generator, fmt, head, n_gpu_layers, n_threads)


@lru_cache(maxsize=4)
def _gguf(path: str):
    """The GGUF's tensor table and metadata (no weights read): parsed once, as a session asks several times."""
    import_torch()
    from edgereason.backends.torch.model import Weights

    return Weights(Path(path))


def check_architecture(path: Path) -> None:
    """One ModelError line unless the torch backend runs the GGUF's architecture (from its metadata alone)."""
    import_torch()
    from edgereason.backends.torch.model import read_config

    read_config(_gguf(str(path)))


def kv_bytes_per_token(path: Path, n_gpu_layers: int = 0) -> int:
    torch = import_torch()
    from edgereason.backends.torch.model import kv_bytes_per_token as per_token
    from edgereason.backends.torch.model import read_config

    return per_token(read_config(_gguf(str(path))), torch.device(device_for(n_gpu_layers)))


def weights_bytes(path: Path, n_gpu_layers: int = 0) -> int:
    """The bytes the GGUF's weights take dequantized on the device (bf16 on CUDA, float32 on the CPU)."""
    torch = import_torch()
    from edgereason.backends.torch.model import device_dtype

    size = torch.tensor([], dtype=device_dtype(torch.device(device_for(n_gpu_layers)))).element_size()
    return size * sum(int(t.n_elements) for t in _gguf(str(path)).reader.tensors)


def decode_points(generator: object, rows: tuple[int, ...], steps: int, n_threads: int | None) -> Points | None:
    """Decode throughput at each row count of this session's generator (`--policy auto` reads its pass cost)."""
    from edgereason.backends.torch.generator import TorchGenerator
    from edgereason.backends.torch.measure import measure_decode

    if not isinstance(generator, TorchGenerator):
        return None
    return measure_decode(generator.model, rows, steps)


__all__ = [
    "SEQ_SLOTS",
    "check_architecture",
    "decode_points",
    "import_torch",
    "kv_bytes_per_token",
    "open_generator",
    "open_model",
    "open_models",
    "profiled_generator",
    "profiled_prm",
    "require_gpu",
    "supports_gpu",
    "weights_bytes",
]
