"""Opening the two models and an engine from user settings: the one place CLI, chat UI and bench share.

KV memory: either `--kv-tokens` per model, or one `--kv-budget` for both, split by the memory profile of this
device and model pair (`edgereason memory-profile`) or evenly. The profile also gives the lazy-verification
threshold; without one the engine uses safe defaults and says how to profile (once per device and model pair).
"""

from __future__ import annotations

import math
import shlex
import sys
from dataclasses import dataclass, replace
from importlib.util import find_spec
from pathlib import Path

import psutil

from edgereason import models
from edgereason.backends import load_backend
from edgereason.backends.remote.settings import RemoteSettings
from edgereason.config import check_threads
from edgereason.engine import Engine
from edgereason.errors import ConfigError, ModelError
from edgereason.events import Listener
from edgereason.memory import default_device_id, find_profile, verifier_id
from edgereason.memory.size import format_size, format_size_in
from edgereason.memory.store import profile_path
from edgereason.gpu import DEFAULT_TOP_K, default_gpu_layers, device_top_k, gpu_present, gpu_settings
from edgereason.policy import Policy
from edgereason.policy_auto import AutoChoice, choice_for, is_auto, resolve
from edgereason.prm_choice import HF_PREFIX, SELF, choose_prm
from edgereason.protocols import Generator, Verifier

DEFAULT_KV_TOKENS = 16384  # per model; about 370 MB for SmolLM2, 200 MB for Qwen2.5-0.5B
DEFAULT_LV_THRESHOLD = {"cpu": 512, "gpu": 2048}  # tokens (design.md section 4)
SPLITS = ("profile", "even")
LOCAL_BACKENDS = ("auto", "llamacpp", "torch")  # auto: torch where CUDA torch is installed and the models fit
MIN_KV_TOKENS = 256  # per model: room for a prompt and a few steps

PROFILE_TIPS = "profile-tips"  # under $EDGEREASON_HOME: profile file names already said to be missing


@dataclass(frozen=True)
class ModelSettings:
    model: str = models.DEFAULT_MODEL
    prm: str | None = None  # None or "self": the generator's own weights
    prm_format: str = "auto"  # auto: a trained value head where one is given or ships for the PRM, else judge
    prm_head: str | None = None  # value head file for the head format
    prm_device: str = "auto"  # an hf: PRM's torch device: auto (CUDA when torch sees one), cpu or cuda
    threads: int | None = None
    generator_kv_tokens: int = DEFAULT_KV_TOKENS
    verifier_kv_tokens: int = DEFAULT_KV_TOKENS
    kv_budget_bytes: int | None = None  # both models together; overrides the per-model token counts
    split: str = "profile"
    n_gpu_layers: int | None = None  # None: all layers where a CUDA build sees a GPU, else 0 (edgereason/gpu.py)
    gpu_memory_bytes: int | None = None  # cap on weights + KV on the GPU; derives the KV budget when none is given
    device_sampling: str = "auto"  # top-k cut on the device: auto = where layers are on a GPU, on, off
    device_top_k: int = DEFAULT_TOP_K
    flash_attn: bool = True  # off: bit-exact incremental PRM scoring, much slower with many cells in use
    kv_budget_unit: str = "MiB"  # the unit the user wrote --kv-budget in: messages about it use the same
    verbose: bool = False  # start-up notes on every run, not once per device and model pair
    remote: RemoteSettings | None = None  # roles served by an OpenAI-compatible server (backends/remote)
    backend: str = "auto"  # the local runtime: LOCAL_BACKENDS

    def __post_init__(self) -> None:
        check_threads(self.threads)
        if self.backend not in LOCAL_BACKENDS:
            raise ConfigError(f"--backend must be one of {', '.join(LOCAL_BACKENDS)} or remote, got {self.backend!r}")
        if self.generator_kv_tokens < MIN_KV_TOKENS or self.verifier_kv_tokens < MIN_KV_TOKENS:
            raise ConfigError(f"each model needs at least {MIN_KV_TOKENS} KV tokens; raise --kv-tokens")
        if self.split not in SPLITS:
            raise ConfigError(f"--split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        if self.kv_budget_bytes is not None and self.kv_budget_bytes <= 0:
            raise ConfigError("--kv-budget must be positive")
        if self.gpu_memory_bytes is not None and self.gpu_memory_bytes <= 0:
            raise ConfigError("--gpu-memory must be positive")
        if self.n_gpu_layers is not None and self.n_gpu_layers < 0:
            raise ConfigError(f"--gpu-layers must be >= 0, got {self.n_gpu_layers}")


@dataclass
class Session:
    settings: ModelSettings
    generator: Generator
    verifier: Verifier
    generator_path: Path
    prm_path: Path
    lv_threshold: int = DEFAULT_LV_THRESHOLD["cpu"]
    profile: dict | None = None
    backend: str = "llamacpp"  # the runtime the models run on (solve --json and bench results name it)
    _auto: AutoChoice | None = None

    def engine(self, policy: Policy, on_event: Listener | None = None) -> Engine:
        """An engine running `policy`; `auto` runs the preset this device's pass cost chooses."""
        if is_auto(policy):
            policy = resolve(policy, self.auto_choice())
        return Engine(self.generator, self.verifier, policy, on_event=on_event, lv_threshold=self.lv_threshold)

    def auto_choice(self) -> AutoChoice:
        """What `auto` runs in this session: decided once (profile, cache or a second's measurement)."""
        if self._auto is None:
            self._auto = choice_for(self)
            if self.settings.verbose:
                print(self._auto.note(), file=sys.stderr)
        return self._auto

    def close(self) -> None:
        for model in (self.generator, self.verifier):
            close = getattr(model, "close", None)
            if close:
                close()


def _prm_name(settings: ModelSettings) -> str:
    return settings.model if settings.prm in (None, SELF) else settings.prm


def _profile_key(settings: ModelSettings) -> tuple[str, str, str]:
    """(device, generator, verifier): what this device and model pair's memory profile is stored under."""
    device = default_device_id("gpu" if settings.n_gpu_layers else "cpu")
    return device, models.display_name(settings.model), verifier_id(_prm_name(settings), settings.prm_format)


def _profile_for(settings: ModelSettings) -> dict | None:
    return find_profile(*_profile_key(settings))


def _note_no_profile(settings: ModelSettings) -> None:
    """Say how to profile, once the models are open (a run that fails ends with its error alone). A damaged
    profile is reported as such on every run; a missing one once per device and model pair (remembered in
    $EDGEREASON_HOME/profile-tips), or on every run with --verbose."""
    path = profile_path(*_profile_key(settings))
    command = (f"edgereason memory-profile --model {shlex.quote(settings.model)} "
               f"--prm {shlex.quote(_prm_name(settings))}")
    if path.exists():
        print(f"edgereason: the memory profile {path} is corrupt; using defaults. Rebuild it: {command}",
              file=sys.stderr)
    elif settings.verbose or _first_time(path.name):
        print(f"edgereason: no memory profile for this device and models; using defaults. To tune: {command}",
              file=sys.stderr)


def _first_time(key: str) -> bool:
    """True the first time `key` is asked about in this $EDGEREASON_HOME, which remembers it."""
    tips = models.home() / PROFILE_TIPS
    try:
        if tips.is_file() and key in tips.read_text().splitlines():
            return False
        tips.parent.mkdir(parents=True, exist_ok=True)
        with tips.open("a") as f:
            f.write(key + "\n")
    except OSError:  # an unwritable home only costs repeating the note
        pass
    return True


def kv_tokens(settings: ModelSettings, gen_bytes_per_token: int, ver_bytes_per_token: int,
              profile: dict | None) -> tuple[int, int]:
    """Per-model KV tokens: a budget is split by the profile's byte shares (or evenly), else the flags."""
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
        raise ConfigError(f"--kv-budget {format_size_in(settings.kv_budget_bytes, unit)} leaves {gen} generator "
                          f"and {ver} PRM KV tokens; each model needs at least {MIN_KV_TOKENS}: use --kv-budget "
                          f"{format_size_in(need, unit)} or more")
    return gen, ver


def _split(budget_bytes: int, share: float, gen_bytes_per_token: int, ver_bytes_per_token: int) -> tuple[int, int]:
    return (int(budget_bytes * share) // gen_bytes_per_token,
            int(budget_bytes * (1 - share)) // ver_bytes_per_token)


def _min_budget(share: float, gen_bytes_per_token: int, ver_bytes_per_token: int) -> int:
    """The smallest budget whose split by `share` gives each model MIN_KV_TOKENS."""
    need = math.ceil(max(MIN_KV_TOKENS * gen_bytes_per_token / share,
                         MIN_KV_TOKENS * ver_bytes_per_token / (1 - share)))
    while min(_split(need, share, gen_bytes_per_token, ver_bytes_per_token)) < MIN_KV_TOKENS:
        need += 1  # float rounding of the share
    return need


def _check_host_memory(settings: ModelSettings, kv_bytes: int) -> None:
    """llama.cpp allocates and clears a KV cache in host memory whole when it makes the context: one larger than
    the free memory is no error there, the kernel's OOM killer ends the process (exit 137, no message)."""
    free = psutil.virtual_memory().available
    if kv_bytes > free:
        flag = (f"--kv-budget {format_size_in(settings.kv_budget_bytes, settings.kv_budget_unit)}"
                if settings.kv_budget_bytes is not None else f"--kv-tokens {settings.generator_kv_tokens}")
        raise ConfigError(f"{flag} needs {format_size(kv_bytes)} of KV memory for the two models, more than the "
                          f"{format_size(free)} free on this machine; lower {flag.split()[0]}")


def choose_backend(settings: ModelSettings, gen_path: Path, prm_path: Path, hf: bool) -> str:
    """settings.backend, with auto decided: torch where NVML sees a GPU, torch is installed with CUDA, it runs the
    models' architectures and they fit under --gpu-memory in bf16; else llama.cpp (a CPU stays on llama.cpp without
    importing torch).
    A fallback for a reason the user may not expect is said in one line."""
    if settings.backend != "auto":
        return settings.backend
    if settings.n_gpu_layers == 0 or not gpu_present() or find_spec("torch") is None or find_spec("gguf") is None:
        return "llamacpp"
    try:
        torch_backend = load_backend("torch")
        if not torch_backend.supports_gpu():
            return _fall_back(torch_backend.no_cuda())
    except ConfigError as e:  # torch cannot join this process beside this llama.cpp build
        return _fall_back(str(e))
    roles = [gen_path] if hf else [gen_path, prm_path]  # an hf: PRM runs on transformers either way
    try:
        for path in roles:
            torch_backend.check_architecture(path)
    except ModelError as e:
        return _fall_back(str(e))
    if settings.gpu_memory_bytes is not None:
        need = sum(MIN_KV_TOKENS * torch_backend.kv_bytes_per_token(p, 1) for p in roles)
        need += sum(torch_backend.weights_bytes(p, 1) for p in {p.resolve() for p in roles})
        if need > settings.gpu_memory_bytes:
            return _fall_back(f"the models need {format_size(need)} in bf16 on torch, more than --gpu-memory "
                              f"{format_size(settings.gpu_memory_bytes)}")
    return "torch"


def _fall_back(why: str) -> str:
    print(f"edgereason: --backend auto runs on llama.cpp: {why}", file=sys.stderr)
    return "llamacpp"


def open_session(settings: ModelSettings, backend: str | None = None, progress=None) -> Session:
    """backend: the local runtime, overriding settings.backend (auto decides by CUDA and --gpu-memory)."""
    if settings.remote is not None:
        return _open_remote(settings, settings.remote, progress)
    choice = choose_prm(settings.model, settings.prm, settings.prm_format, settings.prm_head)
    settings = replace(settings, prm_format=choice.format)
    gen_path = models.resolve(settings.model, progress=progress)
    hf = choice.name.startswith(HF_PREFIX)
    if hf:  # the PRM on torch beside the generator (a registry name means its GGUF, read into torch)
        name = choice.name[len(HF_PREFIX):]
        prm_path = models.resolve(name, progress=progress, role="PRM") if name in models.REGISTRY else Path(name)
    else:
        prm_path = gen_path if choice.name == settings.model else models.resolve(choice.name, progress=progress,
                                                                                  role="PRM")
    backend = choose_backend(replace(settings, backend=backend or settings.backend), gen_path, prm_path, hf)
    runtime = load_backend(backend)
    prm_runtime = load_backend("transformers") if hf else runtime
    if settings.n_gpu_layers:
        runtime.require_gpu("drop --gpu-layers")
    settings = gpu_settings(settings, runtime, gen_path, prm_path, prm_runtime if hf else None)
    top_k = device_top_k(settings.device_sampling, settings.device_top_k, settings.n_gpu_layers)
    profile = _profile_for(settings)
    gen_bpt = runtime.kv_bytes_per_token(gen_path, settings.n_gpu_layers)
    ver_bpt = prm_runtime.kv_bytes_per_token(prm_path, settings.prm_device if hf else settings.n_gpu_layers)
    gen_tokens, ver_tokens = kv_tokens(settings, gen_bpt, ver_bpt, profile)
    if not settings.n_gpu_layers:  # a torch PRM's KV grows as it is used: only llama.cpp's is made whole
        _check_host_memory(settings, gen_tokens * gen_bpt + (0 if hf else ver_tokens * ver_bpt))
    if hf:
        generator = runtime.open_generator(gen_path, gen_tokens, n_threads=settings.threads,
                                           n_gpu_layers=settings.n_gpu_layers, flash_attn=settings.flash_attn,
                                           **({"device_top_k": top_k} if top_k else {}))
        verifier = prm_runtime.open_verifier(prm_path, settings.prm_format, ver_tokens, device=settings.prm_device,
                                             head=choice.head, n_threads=settings.threads)
    else:
        generator, verifier = runtime.open_models(gen_path, prm_path, settings.prm_format, gen_tokens, ver_tokens,
                                                  n_threads=settings.threads, n_gpu_layers=settings.n_gpu_layers,
                                                  flash_attn=settings.flash_attn, head=choice.head,
                                                  # only a backend that can cut rows on the device takes it
                                                  **({"device_top_k": top_k} if top_k else {}))
    if profile is None:
        _note_no_profile(settings)
    lv = int(profile["lv_threshold_tokens"]) if profile else DEFAULT_LV_THRESHOLD[
        "gpu" if settings.n_gpu_layers else "cpu"]
    return Session(settings, generator, verifier, gen_path, prm_path, lv_threshold=lv, profile=profile,
                   backend=backend)


def _open_remote(settings: ModelSettings, remote: RemoteSettings, progress=None) -> Session:
    """The PRM (and the generator, when it is served too) on a server. `--model` / `--prm` name the served
    models' GGUFs, read here for their tokenizer and chat template only; no memory profile applies."""
    served, local = load_backend("remote"), load_backend("llamacpp")
    if settings.prm_format == "head":
        raise ConfigError("--prm-format head cannot be served: a value head reads thousands of logits per step and "
                          "a server returns 20; use judge, rlhflow or math-shepherd with a served PRM")
    fmt = "judge" if settings.prm_format == "auto" else settings.prm_format  # a server cannot run a value head
    choice = choose_prm(settings.model, settings.prm, fmt, settings.prm_head)
    if choice.name.startswith(HF_PREFIX):
        raise ConfigError(f"--prm {choice.name} runs on torch in this process; a served PRM is named by its "
                          "GGUF (its tokenizer and chat template) and --prm-base-url")
    settings = replace(settings, prm_format=choice.format)
    gen_path = models.resolve(settings.model, progress=progress)
    prm_path = gen_path if choice.name == settings.model else models.resolve(choice.name, progress=progress,
                                                                              role="PRM")
    verifier = served.open_verifier(prm_path, choice.format, remote.prm_endpoint)
    try:
        if remote.generator is not None:
            context = remote.context_tokens or 1 << 30  # capped by the trained context
            generator = served.open_generator(gen_path, remote.generator, context, remote.step_tokens)
        else:
            layers = default_gpu_layers(local) if settings.n_gpu_layers is None else settings.n_gpu_layers
            settings = replace(settings, n_gpu_layers=layers)
            tokens = settings.generator_kv_tokens if settings.kv_budget_bytes is None else (  # all of it: no PRM here
                settings.kv_budget_bytes // local.kv_bytes_per_token(gen_path, layers))
            top_k = device_top_k(settings.device_sampling, settings.device_top_k, layers)
            generator = local.open_generator(gen_path, max(MIN_KV_TOKENS, tokens), n_threads=settings.threads,
                                             n_gpu_layers=layers, flash_attn=settings.flash_attn,
                                             **({"device_top_k": top_k} if top_k else {}))
    except BaseException:
        verifier.close()
        raise
    return Session(settings, generator, verifier, gen_path, prm_path,
                   backend="remote" if remote.generator is not None else "llamacpp")
