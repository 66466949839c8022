"""A session whose PRM (and generator, when it is served too) runs on an OpenAI-compatible server.
`--model` and `--prm` name the served models' GGUFs, read here for their tokenizer and chat template
only; no memory profile applies. A value head, which a server cannot run, runs here on llama.cpp
beside a served generator. The PRM, the files and the backend are chosen as for any session
(opening.py's choose_models: the servers are asked before any pull)."""

from __future__ import annotations

from dataclasses import replace

from edgereason.backends import Placement, PRMSpec, load_backend
from edgereason.session.backend_choice import ChosenModels
from edgereason.session.gpu import gpu_layers, local_kv_tokens, placement
from edgereason.session.session import Session


def open_remote(chosen: ChosenModels) -> Session:
    """The models opened: served, or here beside the servers."""
    settings, gen_path, prm_path = chosen.settings, chosen.gen_path, chosen.prm.path
    remote, fmt = settings.remote, chosen.choice.format
    assert remote is not None, "a served setup"
    served, local = load_backend("remote"), load_backend("llamacpp")
    place = Placement(remote=remote)
    context = remote.context_tokens or 1 << 30  # capped by the trained context
    if remote.generator and not remote.prm_here:  # both served
        prm = PRMSpec(prm_path, fmt)
        generator, verifier = served.open_models(gen_path, prm, (context, 0), place)
        return Session(settings, generator, verifier, gen_path, prm_path, backend=chosen.backend)
    budget = settings.kv_budget_bytes
    if remote.prm_here:  # a value head here on llama.cpp beside served generators
        layers = gpu_layers(settings.n_gpu_layers, local)
        prm_place = Placement(layers, n_threads=settings.threads, flash_attn=settings.flash_attn)
        tokens = local_kv_tokens(budget, settings.verifier_kv_tokens, local, prm_path, prm_place)
        verifier = local.open_verifier(chosen.prm, tokens, prm_place)
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
    return Session(settings, generator, verifier, gen_path, prm_path, backend=chosen.backend)
