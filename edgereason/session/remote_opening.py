"""A session whose PRM (and generator, when it is served too) runs on an OpenAI-compatible server.
`--model` and `--prm` name the served models' GGUFs, read here for their tokenizer and chat template
only; no memory profile applies. A value head, which a server cannot run, runs here on llama.cpp
beside a served generator."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from edgereason import models
from edgereason.backends import Placement, PRMSpec, RemoteSettings, load_backend
from edgereason.errors import ConfigError
from edgereason.session.backend_choice import model_paths
from edgereason.session.gpu import gpu_layers, local_kv_tokens, placement
from edgereason.session.prm_choice import PullProgress, choose_prm
from edgereason.session.session import Session
from edgereason.session.settings import ModelSettings


def open_remote(
    settings: ModelSettings,
    remote: RemoteSettings,
    progress: PullProgress | None = None,
) -> Session:
    """The served roles checked before any pull, then the models opened: served, or here beside
    the servers."""
    fmt = _served_format(settings, remote)
    served, local = load_backend("remote"), load_backend("llamacpp")
    choice = choose_prm(settings.model, settings.prm, fmt, settings.prm_head)
    if choice.name.startswith(models.HF_PREFIX):
        raise ConfigError(
            f"--prm {choice.name} runs on torch in this process; a served PRM is named by its "
            "GGUF (its tokenizer and chat template) and --prm-base-url"
        )
    settings, fmt, place = (
        replace(settings, prm_format=choice.format),
        choice.format,
        Placement(remote=remote),
    )
    # before any pull: a server that is down or serves another model is one line, not a failed
    # search after a pull
    served.check_servers(place, settings.model, choice.name, gguf_on_disk)
    gen_path, prm_path = model_paths(settings.model, choice, progress)
    context = remote.context_tokens or 1 << 30  # capped by the trained context
    if remote.generator and not remote.prm_here:  # both served
        prm = PRMSpec(prm_path, fmt)
        generator, verifier = served.open_models(gen_path, prm, (context, 0), place)
        return Session(settings, generator, verifier, gen_path, prm_path, backend="remote")
    budget = settings.kv_budget_bytes
    if remote.prm_here:  # a value head here on llama.cpp beside served generators
        layers = gpu_layers(settings.n_gpu_layers, local)
        prm_place = Placement(layers, n_threads=settings.threads, flash_attn=settings.flash_attn)
        tokens = local_kv_tokens(budget, settings.verifier_kv_tokens, local, prm_path, prm_place)
        verifier = local.open_verifier(PRMSpec(prm_path, fmt, choice.head), tokens, prm_place)
    else:
        verifier = served.open_verifier(PRMSpec(prm_path, fmt), 0, place)
    try:
        if remote.generator:
            generator = served.open_generator(gen_path, context, place)
        else:  # all of the budget: no PRM here
            settings = replace(settings, n_gpu_layers=gpu_layers(settings.n_gpu_layers, local))
            here = placement(settings)
            tokens = local_kv_tokens(budget, settings.generator_kv_tokens, local, gen_path, here)
            generator = local.open_generator(gen_path, tokens, here)
    except BaseException:
        verifier.close()
        raise
    backend = "remote" if remote.generator else "llamacpp"
    return Session(settings, generator, verifier, gen_path, prm_path, backend=backend)


def _served_format(settings: ModelSettings, remote: RemoteSettings) -> str:
    """The PRM format a served setup runs, checked: a server runs no value head and no hf: model."""
    if settings.model.startswith(models.HF_PREFIX):
        raise ConfigError(
            f"--model {settings.model} runs on the torch backend, which a served setup does not "
            "use; name the generator by its GGUF"
        )
    if settings.prm_format == "head" and not remote.prm_here:
        raise ConfigError(
            "--prm-format head cannot be served: a value head reads thousands of logits per step "
            "and a server returns 20; drop --prm-base-url to run it here, or use judge, rlhflow or "
            "math-shepherd"
        )
    return "judge" if settings.prm_format == "auto" else settings.prm_format


def gguf_on_disk(name: str, role: str) -> Path | None:
    """The GGUF `name` names, checked; None for a registry model not pulled yet (a look-up that
    must not pull)."""
    if name in models.REGISTRY and not models.is_cached(models.REGISTRY[name]):
        return None
    return models.resolve(name, allow_pull=False, role=role)
