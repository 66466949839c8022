"""Opening the two models and an engine from user settings: the one place CLI, chat UI and bench
share.

The set-up is one straight sequence, served setups included: the PRM (prm_choice.py), both models'
files and the backend (backend_choice.py), chosen together by `choose_models` (memory-profile's
set-up too); then served roles open in remote_opening.py, and models here get their placement and
GPU budget (gpu.py), the CPU threads (cpu_threads.py), the memory profile and the KV split
(profile_choice.py, kv_split.py), and open; the Session (session.py) builds engines."""

from __future__ import annotations

from dataclasses import replace

from edgereason.backends import PRMSpec, load_backend
from edgereason.session.backend_choice import (
    ChosenModels,
    choose_backend,
    model_files,
    prm_on_transformers,
)
from edgereason.session.cpu_threads import fit_threads_to_load
from edgereason.session.gpu import place_models
from edgereason.session.kv_split import check_host_memory, kv_tokens
from edgereason.session.prm_choice import PullProgress, prm_for
from edgereason.session.profile_choice import profile_for
from edgereason.session.remote_opening import open_remote
from edgereason.session.session import DEFAULT_LV_THRESHOLD, Session
from edgereason.session.settings import ModelSettings
from edgereason.util.startup import phase


def open_session(settings: ModelSettings, progress: PullProgress | None = None) -> Session:
    chosen = choose_models(settings, progress)
    if settings.remote is not None:
        return open_remote(chosen)
    settings, runtime, prm_runtime = chosen.settings, chosen.runtime, chosen.prm_runtime
    gen_path, prm, hf = chosen.gen_path, chosen.prm, chosen.prm_on_transformers
    hf_runtime = prm_runtime if hf else None  # an hf: PRM's weights count on transformers
    settings, place = place_models(settings, runtime, gen_path, prm.path, hf_runtime)
    settings, place, busy_cores = fit_threads_to_load(settings, place, chosen.backend)
    looked = profile_for(settings, chosen.backend)
    profile = looked.profile
    gen_bpt = runtime.kv_bytes_per_token(gen_path, place)
    ver_bpt = prm_runtime.kv_bytes_per_token(prm.path, place)
    gen_tokens, ver_tokens = kv_tokens(settings, gen_bpt, ver_bpt, profile)
    # a torch PRM's KV grows as it is used: only llama.cpp's is made whole
    if not settings.n_gpu_layers:
        check_host_memory(settings, gen_tokens * gen_bpt + (0 if hf else ver_tokens * ver_bpt))
    if hf:
        generator = runtime.open_generator(gen_path, gen_tokens, place)
        verifier = prm_runtime.open_verifier(prm, ver_tokens, place)
    else:
        generator, verifier = runtime.open_models(gen_path, prm, (gen_tokens, ver_tokens), place)
    device = "gpu" if settings.n_gpu_layers else "cpu"
    lv = int(profile["lv_threshold_tokens"]) if profile else DEFAULT_LV_THRESHOLD[device]
    paths = (gen_path, prm.path)
    return Session(
        settings,
        *(generator, verifier, *paths, chosen.backend),
        lv_threshold=lv,
        profile=profile,
        start_notes=tuple(n for n in (busy_cores, looked.tip) if n),
    )


def choose_models(settings: ModelSettings, progress: PullProgress | None) -> ChosenModels:
    """The PRM (prm_choice.py), both models' files (pulled where needed) and the backend."""
    choice = prm_for(settings)
    settings = replace(settings, prm_format=choice.format)
    with phase("model_files"):
        gen_path, prm_path = model_files(settings, choice, progress)
    hf = prm_on_transformers(settings.model, choice)
    backend = choose_backend(settings, gen_path, prm_path, hf)
    runtime = load_backend(backend)
    prm_runtime = load_backend("transformers") if hf else runtime
    prm = PRMSpec(prm_path, choice.format, choice.head)
    return ChosenModels(settings, choice, gen_path, prm, backend, runtime, prm_runtime)
