"""GPU defaults for a session: every layer on the GPU where a CUDA build sees one, and the
`--gpu-memory` cap.

Rules:
- `--gpu-layers` unset: all layers (ALL_LAYERS) when the backend can offload and NVML finds a GPU,
  else 0.
- `--gpu-memory SIZE` caps weights + KV. Without `--kv-budget`, the KV budget is what the weights
  leave under the cap, less a margin for llama.cpp's compute and output buffers, split between the
  models as `--kv-budget` is.
- `--gpu-memory` with no layers on a GPU is an error: silently ignoring a cap would let a "24 GB"
  measurement run on something else.
- An `hf:` PRM (torch) counts under the cap with its weights as they load on CUDA (bf16, not its
  file size) and its own KV bytes per token; under `--gpu-memory` it must run on CUDA, for the same
  reason."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from edgereason.backends import Backend, Placement, load_backend
from edgereason.errors import ConfigError
from edgereason.memory.device import AUTO_MARGIN_FRACTION, AUTO_MARGIN_MIN, AUTO_MAX_TOKENS
from edgereason.memory.size import format_size
from edgereason.memory.split import MIN_KV_TOKENS
from edgereason.search.recipes import Device
from edgereason.session.settings import ModelSettings

ALL_LAYERS = 999  # llama.cpp clamps to the model's layer count
DEVICE_SAMPLING_MODES = ("auto", "on", "off")  # auto: on where the generator's layers are on a GPU
MAX_TOP_K = 1024


def gpu_present() -> bool:
    """NVML sees at least one NVIDIA GPU (False without nvidia-ml-py or a driver)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # ImportError, or NVMLError without a driver
        return False
    try:
        return pynvml.nvmlDeviceGetCount() > 0
    finally:
        pynvml.nvmlShutdown()


def default_gpu_layers(runtime: Backend) -> int:
    return ALL_LAYERS if runtime.supports_gpu() and gpu_present() else 0


def recipe_device(settings: ModelSettings) -> Device:
    """Where the generator's layers will run, as the session decides it (the recipe for that
    device is run); a served generator has no recipe, so no device to ask."""
    if settings.served_generator:
        return "cpu"
    if settings.n_gpu_layers is not None:
        return "gpu" if settings.n_gpu_layers > 0 else "cpu"
    runtime = load_backend("torch" if settings.backend == "torch" else "llamacpp")
    return "gpu" if default_gpu_layers(runtime) > 0 else "cpu"


def gpu_layers(n_gpu_layers: int | None, runtime: Backend) -> int:
    """--gpu-layers, or where unset the runtime's default here."""
    return default_gpu_layers(runtime) if n_gpu_layers is None else n_gpu_layers


def local_kv_tokens(
    budget_bytes: int | None, default: int, runtime: Backend, path: Path, place: Placement
) -> int:
    """The KV of the one model that runs here beside served ones: the whole --kv-budget, else
    `default`."""
    if budget_bytes is None:
        return max(MIN_KV_TOKENS, default)
    return max(MIN_KV_TOKENS, budget_bytes // runtime.kv_bytes_per_token(path, place))


def capped_kv_budget(cap_bytes: int, weights: int, bytes_per_token: int) -> int:
    """KV bytes for both models under a cap of weights + KV: what the weights leave, less a margin,
    and no more than AUTO_MAX_TOKENS per model (bytes_per_token: both models' together), more than a
    search here holds."""
    after_weights = cap_bytes - weights
    budget = after_weights - max(int(AUTO_MARGIN_FRACTION * after_weights), AUTO_MARGIN_MIN)
    if budget <= 0:
        raise ConfigError(
            f"--gpu-memory {format_size(cap_bytes)} leaves no room for KV caches: the weights take "
            f"{format_size(weights)} and llama.cpp's buffers need {format_size(AUTO_MARGIN_MIN)} "
            "or more; raise --gpu-memory"
        )
    return min(budget, AUTO_MAX_TOKENS * bytes_per_token)


def gpu_settings(
    settings,
    runtime: Backend,
    gen_path: Path,
    prm_path: Path,
    prm_runtime: Backend | None = None,
):
    """ModelSettings with n_gpu_layers decided and, under a --gpu-memory cap, the KV budget derived.

    prm_runtime: the transformers backend when the PRM is an hf: checkpoint (None: the PRM is on
    `runtime`)."""
    layers = gpu_layers(settings.n_gpu_layers, runtime)
    settings = replace(settings, n_gpu_layers=layers)
    if settings.gpu_memory_bytes is None:
        return settings
    if not layers:
        why = (
            "--gpu-layers is 0"
            if runtime.supports_gpu() and gpu_present()
            else "this llama-cpp-python build has no GPU support"
            if not runtime.supports_gpu()
            else "no GPU was found"
        )
        raise ConfigError(
            f"--gpu-memory caps GPU memory, but no layers are on a GPU ({why}); drop --gpu-memory"
        )
    place = placement(settings)
    if prm_runtime is None:
        weights = _weights(runtime, gen_path, prm_path, place)
        prm_per_token = runtime.kv_bytes_per_token(prm_path, place)
    else:
        if not prm_runtime.on_gpu(place):
            raise ConfigError(
                f"--gpu-memory caps GPU memory, but the hf: PRM runs on the CPU (--prm-device "
                f"{settings.prm_device}); use --prm-device cuda or drop --gpu-memory"
            )
        weights = _weights(runtime, gen_path, gen_path, place)
        weights += prm_runtime.weights_bytes(prm_path, place)
        prm_per_token = prm_runtime.kv_bytes_per_token(prm_path, place)
    if settings.kv_budget_bytes is not None:
        if weights + settings.kv_budget_bytes > settings.gpu_memory_bytes:
            raise ConfigError(
                f"--kv-budget {format_size(settings.kv_budget_bytes)} and the weights "
                f"({format_size(weights)}) exceed --gpu-memory "
                f"{format_size(settings.gpu_memory_bytes)}"
            )
        return settings
    per_token = runtime.kv_bytes_per_token(gen_path, place) + prm_per_token
    budget = capped_kv_budget(settings.gpu_memory_bytes, weights, per_token)
    return replace(settings, kv_budget_bytes=budget, kv_budget_unit="MiB")


def _weights(runtime: Backend, gen_path: Path, prm_path: Path, place: Placement) -> int:
    """Both models' weights as the runtime holds them (the GGUF files on llama.cpp, dequantized to
    bf16 on torch); one file serving both roles is loaded once."""
    return sum(runtime.weights_bytes(p, place) for p in {gen_path.resolve(), prm_path.resolve()})


def place_models(
    settings: ModelSettings,
    runtime: Backend,
    gen_path: Path,
    prm_path: Path,
    prm_runtime: Backend | None = None,
) -> tuple[ModelSettings, Placement]:
    """Where a session's models run here: --gpu-layers checked against the runtime, the layers and
    the GPU budget decided (gpu_settings), and their placement."""
    if settings.n_gpu_layers:
        runtime.require_gpu("drop --gpu-layers")
    settings = gpu_settings(settings, runtime, gen_path, prm_path, prm_runtime)
    return settings, placement(settings)


def placement(settings: ModelSettings) -> Placement:
    """Where the models of settings run here, once its n_gpu_layers is decided."""
    layers = settings.n_gpu_layers or 0
    return Placement(
        n_gpu_layers=layers,
        device=settings.prm_device,
        n_threads=settings.threads,
        flash_attn=settings.flash_attn,
        device_top_k=device_top_k(settings.device_sampling, settings.device_top_k, layers),
        torch_weights=settings.torch_weights,
    )


def device_top_k(mode: str, top_k: int, n_gpu_layers: int) -> int:
    """The k a generator context cuts its rows to; 0 = host sampling over the whole row.

    auto turns the cut on where layers are on a GPU: there it replaces a device-to-host copy of
    every row's logits. On a CPU the logits are already in host memory, and the cut measured no
    faster (benchmarks/ device_sampling.py), so auto keeps host sampling there; `on` forces it (it
    works on the CPU backend too)."""
    if mode not in DEVICE_SAMPLING_MODES:
        raise ConfigError(
            f"--device-sampling takes {', '.join(DEVICE_SAMPLING_MODES)}, got {mode!r}"
        )
    if not 1 <= top_k <= MAX_TOP_K:
        raise ConfigError(f"--device-top-k must be in 1..{MAX_TOP_K}, got {top_k}")
    on = mode == "on" or (mode == "auto" and n_gpu_layers > 0)
    return top_k if on else 0
