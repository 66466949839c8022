"""KV memory per model: either `--kv-tokens` per model, or one `--kv-budget` for both, split by the
memory profile of this device and model pair (`edgereason memory-profile`) or evenly; and the check
that a host-memory cache fits."""

from __future__ import annotations

import math

import psutil

from edgereason.errors import ConfigError
from edgereason.memory.size import format_size, format_size_in
from edgereason.session.settings import MIN_KV_TOKENS, ModelSettings


def kv_tokens(
    settings: ModelSettings,
    gen_bytes_per_token: int,
    ver_bytes_per_token: int,
    profile: dict | None,
) -> tuple[int, int]:
    """Per-model KV tokens: a budget is split by the profile's byte shares (or evenly), else the
    flags."""
    if settings.kv_budget_bytes is None:
        return settings.generator_kv_tokens, settings.verifier_kv_tokens
    share = 0.5
    if settings.split == "profile" and profile is not None:
        gen_b, ver_b = profile["generator_kv_bytes"], profile["verifier_kv_bytes"]
        share = gen_b / (gen_b + ver_b)
    gen, ver = _split(settings.kv_budget_bytes, share, gen_bytes_per_token, ver_bytes_per_token)
    if min(gen, ver) < MIN_KV_TOKENS:
        unit = settings.kv_budget_unit
        need = _min_budget(share, gen_bytes_per_token, ver_bytes_per_token)
        raise ConfigError(
            f"--kv-budget {format_size_in(settings.kv_budget_bytes, unit)} leaves {gen} generator "
            f"and {ver} PRM KV tokens; each model needs at least {MIN_KV_TOKENS}: use --kv-budget "
            f"{format_size_in(need, unit)} or more"
        )
    return gen, ver


def _split(
    budget_bytes: int, share: float, gen_bytes_per_token: int, ver_bytes_per_token: int
) -> tuple[int, int]:
    return (
        int(budget_bytes * share) // gen_bytes_per_token,
        int(budget_bytes * (1 - share)) // ver_bytes_per_token,
    )


def _min_budget(share: float, gen_bytes_per_token: int, ver_bytes_per_token: int) -> int:
    """The smallest budget whose split by `share` gives each model MIN_KV_TOKENS."""
    need = math.ceil(
        max(
            MIN_KV_TOKENS * gen_bytes_per_token / share,
            MIN_KV_TOKENS * ver_bytes_per_token / (1 - share),
        )
    )
    while min(_split(need, share, gen_bytes_per_token, ver_bytes_per_token)) < MIN_KV_TOKENS:
        need += 1  # float rounding of the share
    return need


def check_host_memory(settings: ModelSettings, kv_bytes: int) -> None:
    """llama.cpp allocates and clears a KV cache in host memory whole when it makes the context: one
    larger than the free memory is no error there, the kernel's OOM killer ends the process (exit
    137, no message)."""
    free = psutil.virtual_memory().available
    if kv_bytes > free:
        flag = (
            f"--kv-budget {format_size_in(settings.kv_budget_bytes, settings.kv_budget_unit)}"
            if settings.kv_budget_bytes is not None
            else f"--kv-tokens {settings.generator_kv_tokens}"
        )
        raise ConfigError(
            f"{flag} needs {format_size(kv_bytes)} of KV memory for the two models, more than the "
            f"{format_size(free)} free on this machine; lower {flag.split()[0]}"
        )
