"""Opening the two models and an engine from user settings: the one place CLI, chat UI and bench share. The KV
split is kv_split.py's, the memory profile lookup profile_lookup.py's; backends are opened by name."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from edgereason import models
from edgereason.backends import Backend, Placement, PRMSpec, RemoteSettings, load_backend
from edgereason.engine.events import Listener
from edgereason.engine.loop import Engine
from edgereason.engine.policy import Policy
from edgereason.errors import ConfigError, ModelError
from edgereason.protocols import Generator, Points, Verifier
from edgereason.session.auto_policy import MEASURE_ROWS, MEASURE_STEPS, AutoChoice, choice_for, is_auto, resolve
from edgereason.session.backend_choice import choose_backend
from edgereason.session.gpu import default_gpu_layers, device_top_k, gpu_settings
from edgereason.session.kv_split import check_host_memory, kv_tokens
from edgereason.session.prm_choice import PRMChoice, choose_prm
from edgereason.session.profile_lookup import note_no_profile, pass_cost_key, profile_for
from edgereason.session.settings import MIN_KV_TOKENS, ModelSettings

DEFAULT_LV_THRESHOLD = {"cpu": 512, "gpu": 2048}  # tokens (design.md section 4)
PullProgress = Callable[[str, int, int], None]


@dataclass
class Session:
    settings: ModelSettings
    generator: Generator
    verifier: Verifier
    generator_path: Path
    prm_path: Path
    backend: str = "llamacpp"  # the generator's backend (what measures its pass cost)
    lv_threshold: int = DEFAULT_LV_THRESHOLD["cpu"]
    profile: dict | None = None
    _auto: AutoChoice | None = None

    def engine(self, policy: Policy, on_event: Listener | None = None) -> Engine:
        """An engine running `policy`; `auto` runs the preset this device's pass cost chooses."""
        if is_auto(policy):
            policy = resolve(policy, self.auto_choice())
        return Engine(self.generator, self.verifier, policy, on_event=on_event, lv_threshold=self.lv_threshold)

    def auto_choice(self) -> AutoChoice:
        """What `auto` runs in this session: decided once (profile, cache or a second's measurement)."""
        if self._auto is None:
            runtime, threads = load_backend(self.backend), self.settings.threads

            def decode() -> Points | None:
                return runtime.decode_points(self.generator, MEASURE_ROWS, MEASURE_STEPS, threads)

            measure = decode if runtime.capabilities.measures_decode else None
            self._auto = choice_for(self.profile, pass_cost_key(self.settings, self.backend), measure)
            if self.settings.verbose:
                print(self._auto.note(), file=sys.stderr)
        return self._auto

    def requests_per_server(self) -> dict[str, dict[str, int]]:
        """The requests each server answered so far, by role ("generator", "prm"): served roles only, so {} where
        both models run here."""
        counts: dict[str, dict[str, int]] = {}
        for role, model in (("generator", self.generator), ("prm", self.verifier)):
            read = getattr(model, "requests_per_server", None)
            for url, n in (read() if read else {}).items():
                counts.setdefault(url, {})[role] = n
        return counts

    def close(self) -> None:
        for model in (self.generator, self.verifier):
            close = getattr(model, "close", None)
            if close:
                close()


def open_session(settings: ModelSettings, backend: str | None = None, progress: PullProgress | None = None) -> Session:
    """backend: the local runtime, overriding settings.backend (auto decides by CUDA and --gpu-memory)."""
    if settings.remote is not None:
        return _open_remote(settings, settings.remote, progress)
    choice = choose_prm(settings.model, settings.prm, settings.prm_format, settings.prm_head)
    settings = replace(settings, prm_format=choice.format)
    gen_path, prm_path = model_paths(settings, choice, progress)
    hf = prm_on_transformers(settings.model, choice)  # the PRM on transformers beside the generator
    backend = choose_backend(replace(settings, backend=backend or settings.backend), gen_path, prm_path, hf)
    runtime = load_backend(backend)
    prm_runtime = load_backend("transformers") if hf else runtime
    if settings.n_gpu_layers:
        runtime.require_gpu("drop --gpu-layers")
    settings = gpu_settings(settings, runtime, gen_path, prm_path, prm_runtime if hf else None)
    place = placement(settings)
    profile = profile_for(settings, backend)
    gen_bpt = runtime.kv_bytes_per_token(gen_path, place)
    ver_bpt = prm_runtime.kv_bytes_per_token(prm_path, place)
    gen_tokens, ver_tokens = kv_tokens(settings, gen_bpt, ver_bpt, profile)
    if not settings.n_gpu_layers:  # a torch PRM's KV grows as it is used: only llama.cpp's is made whole
        check_host_memory(settings, gen_tokens * gen_bpt + (0 if hf else ver_tokens * ver_bpt))
    prm = PRMSpec(prm_path, settings.prm_format, choice.head)
    if hf:
        generator = runtime.open_generator(gen_path, gen_tokens, place)
        verifier = prm_runtime.open_verifier(prm, ver_tokens, place)
    else:
        generator, verifier = runtime.open_models(gen_path, prm, (gen_tokens, ver_tokens), place)
    if profile is None:
        note_no_profile(settings, backend)
    lv = (
        int(profile["lv_threshold_tokens"])
        if profile
        else DEFAULT_LV_THRESHOLD["gpu" if settings.n_gpu_layers else "cpu"]
    )
    return Session(settings, generator, verifier, gen_path, prm_path, backend, lv_threshold=lv, profile=profile)


def _open_remote(settings: ModelSettings, remote: RemoteSettings, progress: PullProgress | None = None) -> Session:
    """The PRM (and the generator, when it is served too) on a server. `--model` / `--prm` name the served
    models' GGUFs, read here for their tokenizer and chat template only; no memory profile applies."""
    if settings.model.startswith(models.HF_PREFIX):
        raise ConfigError(
            f"--model {settings.model} runs on the torch backend, which a served setup does not use; name the "
            "generator by its GGUF"
        )
    served, local = load_backend("remote"), load_backend("llamacpp")
    if settings.prm_format == "head" and not remote.prm_here:
        raise ConfigError(
            "--prm-format head cannot be served: a value head reads thousands of logits per step and "
            "a server returns 20; drop --prm-base-url to run it here, or use judge, rlhflow or math-shepherd"
        )
    fmt = "judge" if settings.prm_format == "auto" else settings.prm_format  # a server cannot run a value head
    choice = choose_prm(settings.model, settings.prm, fmt, settings.prm_head)
    if choice.name.startswith(models.HF_PREFIX):
        raise ConfigError(
            f"--prm {choice.name} runs on torch in this process; a served PRM is named by its "
            "GGUF (its tokenizer and chat template) and --prm-base-url"
        )
    settings, fmt = replace(settings, prm_format=choice.format), choice.format
    place = Placement(remote=remote)
    # before any pull: a server that is down or serves another model is one line, not a failed search after a pull
    served.check_servers(place, settings.model, choice.name, gguf_on_disk)
    gen_path, prm_path = model_paths(settings, choice, progress)
    context = remote.context_tokens or 1 << 30  # capped by the trained context
    if remote.generator and not remote.prm_here:  # both served
        prm = PRMSpec(prm_path, fmt)
        generator, verifier = served.open_models(gen_path, prm, (context, 0), place)
        return Session(settings, generator, verifier, gen_path, prm_path, backend="remote")
    if remote.prm_here:
        verifier = _local_prm(settings, choice, prm_path)
    else:
        verifier = served.open_verifier(PRMSpec(prm_path, fmt), 0, place)
    try:
        if remote.generator:
            generator = served.open_generator(gen_path, context, place)
        else:
            settings = replace(settings, n_gpu_layers=_local_layers(settings, local))
            here = placement(settings)
            # all of the budget: no PRM here
            tokens = _local_kv_tokens(settings, local, gen_path, here, settings.generator_kv_tokens)
            generator = local.open_generator(gen_path, tokens, here)
    except BaseException:
        verifier.close()
        raise
    backend = "remote" if remote.generator else "llamacpp"
    return Session(settings, generator, verifier, gen_path, prm_path, backend=backend)


def placement(settings: ModelSettings) -> Placement:
    """Where the models of settings run here, once its n_gpu_layers is decided."""
    layers = settings.n_gpu_layers or 0
    return Placement(
        n_gpu_layers=layers,
        device=settings.prm_device,
        n_threads=settings.threads,
        flash_attn=settings.flash_attn,
        device_top_k=device_top_k(settings.device_sampling, settings.device_top_k, layers),
    )


def _local_layers(settings: ModelSettings, local: Backend) -> int:
    return default_gpu_layers(local) if settings.n_gpu_layers is None else settings.n_gpu_layers


def _local_kv_tokens(
    settings: ModelSettings,
    local: Backend,
    path: Path,
    place: Placement,
    default: int,
) -> int:
    """The KV of the one model that runs here beside served ones: the whole --kv-budget, else `default`."""
    if settings.kv_budget_bytes is None:
        return max(MIN_KV_TOKENS, default)
    return max(MIN_KV_TOKENS, settings.kv_budget_bytes // local.kv_bytes_per_token(path, place))


def _local_prm(settings: ModelSettings, choice: PRMChoice, prm_path: Path) -> Verifier:
    """A value head here on llama.cpp beside served generators (a server cannot run one)."""
    local = load_backend("llamacpp")
    layers, threads = _local_layers(settings, local), settings.threads
    place = Placement(n_gpu_layers=layers, n_threads=threads, flash_attn=settings.flash_attn)
    tokens = _local_kv_tokens(settings, local, prm_path, place, settings.verifier_kv_tokens)
    return local.open_verifier(PRMSpec(prm_path, choice.format, choice.head), tokens, place)


def gguf_on_disk(name: str, role: str) -> Path | None:
    """The GGUF `name` names, checked; None for a registry model not pulled yet (a look-up that must not pull)."""
    if name in models.REGISTRY and not models.is_cached(models.REGISTRY[name]):
        return None
    return models.resolve(name, allow_pull=False, role=role)


def prm_on_transformers(model: str, choice: PRMChoice) -> bool:
    """An hf: PRM runs on transformers, but for the hf: generator's own weights in a format the torch backend's
    verifier reads: that one shares the generator's weights on torch."""
    if not choice.name.startswith(models.HF_PREFIX):
        return False
    torch_formats = load_backend("torch").capabilities.prm_formats
    return not (choice.name == model and choice.format in torch_formats)


def model_paths(settings: ModelSettings, choice: PRMChoice, progress: PullProgress | None) -> tuple[Path, Path]:
    """The generator's weights and the PRM's, pulled where they are registry names not on disk yet. An hf: PRM
    is a folder or a file; a registry name after hf: means its GGUF, read into torch."""
    gen_path = _generator_path(settings.model, progress)
    if choice.name == settings.model:
        return gen_path, gen_path
    if choice.name.startswith(models.HF_PREFIX):
        name = choice.name[len(models.HF_PREFIX) :]
        return gen_path, (
            models.resolve(name, progress=progress, role="PRM") if name in models.REGISTRY else Path(name)
        )
    return gen_path, models.resolve(choice.name, progress=progress, role="PRM")


def _generator_path(model: str, progress: PullProgress | None) -> Path:
    """--model: a registry name or a GGUF; after hf:, a Hugging Face folder for the torch backend (or a registry
    name or a .gguf, read into torch as an hf: PRM's is)."""
    if not model.startswith(models.HF_PREFIX):
        return models.resolve(model, progress=progress)
    name = model[len(models.HF_PREFIX) :]
    if name in models.REGISTRY or name.lower().endswith(".gguf"):
        return models.resolve(name, progress=progress)
    folder = Path(name).expanduser()
    if not folder.is_dir():
        raise ModelError(
            f"--model {model}: {folder} is not a folder; hf: names a Hugging Face model folder (config.json, "
            "*.safetensors and the tokenizer's files)"
        )
    return folder
