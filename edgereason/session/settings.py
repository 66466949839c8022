"""What a session is opened with: the models, their KV memory, the device and the servers (plain
validated data; opening.py turns it into models and an engine)."""

from __future__ import annotations

from dataclasses import dataclass

from edgereason import models
from edgereason.backends import RemoteSettings
from edgereason.config import check_threads
from edgereason.errors import ConfigError
from edgereason.memory.split import MIN_KV_TOKENS  # per model: room for a prompt and a few steps

DEFAULT_KV_TOKENS = 16384  # per model; about 370 MB for SmolLM2, 200 MB for Qwen2.5-0.5B
SPLITS = ("profile", "even")
# auto: backend_choice.py decides
LOCAL_BACKENDS = ("auto", "llamacpp", "torch")
# what auto picks the backend for (backend_rule.py): one search a process (solve, chat), or a
# bench's problems one at a time or several at once
WORKLOADS = ("solve", "one-at-a-time", "many-at-once")


DEFAULT_TOP_K = 100
SELF = "self"  # --prm self: the generator's own weights


@dataclass(frozen=True)
class ModelSettings:
    model: str = models.DEFAULT_MODEL
    prm: str | None = None  # None or "self": the generator's own weights
    # auto: a trained value head where one is given or ships for the PRM, else judge
    prm_format: str = "auto"
    prm_head: str | None = None  # value head file for the head format
    # an hf: PRM's torch device: auto (CUDA when torch sees one), cpu or cuda
    prm_device: str = "auto"
    threads: int | None = None
    generator_kv_tokens: int = DEFAULT_KV_TOKENS
    verifier_kv_tokens: int = DEFAULT_KV_TOKENS
    kv_budget_bytes: int | None = None  # both models together; overrides the per-model token counts
    split: str = "profile"
    n_gpu_layers: int | None = (
        None  # None: all layers where a CUDA build sees a GPU, else 0 (edgereason/session/gpu.py)
    )
    # cap on weights + KV on the GPU; derives the KV budget when none is given
    gpu_memory_bytes: int | None = None
    # top-k cut on the device: auto = where layers are on a GPU, on, off
    device_sampling: str = "auto"
    device_top_k: int = DEFAULT_TOP_K
    # torch: bf16 or int4 layer weights (--torch-weights); None: $EDGEREASON_TORCH_WEIGHTS, else
    # the card's rule (backends/torch/int4_choice.py)
    torch_weights: str | None = None
    # off: bit-exact incremental PRM scoring, much slower with many cells in use
    flash_attn: bool = True
    # the unit the user wrote --kv-budget in: messages about it use the same
    kv_budget_unit: str = "MiB"
    verbose: bool = False  # start-up notes on every run, not once per device and model pair
    # roles served by an OpenAI-compatible server (backends/remote)
    remote: RemoteSettings | None = None
    backend: str = "auto"  # the local runtime: LOCAL_BACKENDS
    workload: str = "solve"  # WORKLOADS

    def __post_init__(self) -> None:
        check_threads(self.threads)
        if self.backend not in LOCAL_BACKENDS:
            raise ConfigError(
                f"--backend must be one of {', '.join(LOCAL_BACKENDS)} or remote, got "
                f"{self.backend!r}"
            )
        if self.workload not in WORKLOADS:
            raise ValueError(f"workload must be one of {WORKLOADS}, got {self.workload!r}")
        if self.generator_kv_tokens < MIN_KV_TOKENS or self.verifier_kv_tokens < MIN_KV_TOKENS:
            raise ConfigError(
                f"each model needs at least {MIN_KV_TOKENS} KV tokens; raise --kv-tokens"
            )
        if self.split not in SPLITS:
            raise ConfigError(f"--split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        if self.kv_budget_bytes is not None and self.kv_budget_bytes <= 0:
            raise ConfigError("--kv-budget must be positive")
        if self.gpu_memory_bytes is not None and self.gpu_memory_bytes <= 0:
            raise ConfigError("--gpu-memory must be positive")
        if self.n_gpu_layers is not None and self.n_gpu_layers < 0:
            raise ConfigError(f"--gpu-layers must be >= 0, got {self.n_gpu_layers}")

    @property
    def prm_model(self) -> str:
        """The PRM's weights as named: the generator's own where --prm is unset or self."""
        return self.model if self.prm in (None, SELF) else self.prm

    @property
    def served_generator(self) -> bool:
        """The generator runs on a server (--backend remote), not here."""
        return self.remote is not None and bool(self.remote.generator)
