"""Model runtimes behind the Generator and Verifier protocols, registered by name."""

from __future__ import annotations

import importlib
from types import ModuleType

from edgereason.errors import ConfigError

BACKENDS: tuple[str, ...] = ("llamacpp", "torch", "transformers", "remote")


def load_backend(name: str) -> ModuleType:
    """The backend's module, imported lazily so the CLI starts fast. It provides
    `open_models(generator_path, prm_path, prm_format, generator_kv_tokens, verifier_kv_tokens, n_threads,
    n_gpu_layers) -> (Generator, Verifier)`, `kv_bytes_per_token(path, n_gpu_layers) -> int` and
    `require_gpu(instead)`, a ConfigError when the runtime cannot offload to a GPU; llamacpp and torch also
    `open_generator(...)` alone, `SEQ_SLOTS` and memory-profile's `profiled_generator(path, n_gpu_layers,
    n_threads)` and `profiled_prm(path, same_as_generator, prm_format, head, n_gpu_layers, n_threads)`
    (protocols.ProfiledGenerator / ProfiledPRM); torch also `weights_bytes(path, n_gpu_layers)` (dequantized on
    its device).
    `transformers` is a PRM backend only: `open_verifier(path, prm_format, kv_tokens, device, head, n_threads) ->
    Verifier`, `kv_bytes_per_token(path, device) -> int`, `weights_bytes(path, device)
    -> int` (as loaded there) and `on_cuda(device) -> bool`. `remote` serves either role from an OpenAI-compatible
    server or several: `open_generator(vocab_path, endpoints, context_tokens, step_tokens, outages)`,
    `open_verifier(vocab_path, prm_format, endpoints, outages=)` and `check_servers(remote, model, prm, on_disk)`, a
    one-line error where a server is down, serves another model than the one named, or (a PRM's) gives no
    logprobs."""
    if name in BACKENDS:
        # by name: no layer above imports a concrete backend's module (pyproject.toml's import contracts)
        return importlib.import_module(f"edgereason.backends.{name}")
    raise ConfigError(f"unknown backend {name!r}; available: {', '.join(BACKENDS)}")
