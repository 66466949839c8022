"""Which runtime a session opens, decided once (`--backend auto|llamacpp|torch|remote`;
`ChosenModels` holds the decision and its `Backend`). auto runs llama.cpp unless torch could: NVML
sees a GPU, torch is installed with CUDA, it runs the models' architectures and they fit in bf16
(under `--gpu-memory`, else in the GPU's memory). Of the two, the backend measured faster on this
device for these models and this workload, or until both were measured the prior (backend_rule.py),
said in one line; whether torch could is checked only where it is the faster (the check imports
torch, seconds of a one-shot command). A CPU stays on llama.cpp without importing torch, and a
quantized model too large for bf16 on llama.cpp; a fallback the user may not expect is said in one
line. A Hugging Face folder as generator (`--model hf:FOLDER`) runs on torch, on a CPU too:
llama.cpp cannot read it.

A served setup runs the served roles on the remote backend and the ones here on llama.cpp.

Before the choice, the models' files: `model_files` checks a served setup's servers before any
pull, `model_paths` pulls registry models not on disk yet, and `prm_on_transformers` says whether
an hf: PRM runs on transformers beside the generator."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from edgereason import models
from edgereason.backends import Backend, Placement, PRMSpec, load_backend
from edgereason.errors import ConfigError, ModelError
from edgereason.memory.device import read_gpu
from edgereason.session.backend_rule import faster_backend, torch_cannot_run
from edgereason.session.gpu import gpu_present
from edgereason.session.prm_choice import PRMChoice, PullProgress
from edgereason.session.settings import ModelSettings
from edgereason.session.speed_log import read_runs, speed_key


def choose_backend(settings: ModelSettings, gen_path: Path, prm_path: Path, hf: bool) -> str:
    """settings.backend, with auto decided; a served generator's is remote. hf: the PRM runs on
    transformers either way (only the generator's weights count here)."""
    if settings.remote is not None:  # the generator's servers, or llama.cpp beside a served PRM
        return "remote" if settings.served_generator else "llamacpp"
    if settings.model.startswith(models.HF_PREFIX):
        if settings.backend == "llamacpp":
            raise ConfigError(
                f"--model {settings.model} runs on the torch backend (llama.cpp reads GGUF files): "
                "use --backend torch or auto, or name a GGUF of the model without hf:"
            )
        return "torch"
    if settings.backend != "auto":
        return settings.backend
    if (
        settings.n_gpu_layers == 0
        or not gpu_present()
        or find_spec("torch") is None
        or find_spec("gguf") is None
    ):
        return "llamacpp"
    # the one measured faster here, else the prior (backend_rule.py); where that is llama.cpp,
    # torch is not imported at all (its import alone cost 4-5 s of an 8 s solve on an H100)
    runs = read_runs(speed_key(read_gpu().device_id, settings), settings.workload)
    choice = faster_backend(runs, settings.workload)
    if choice.backend == "torch" and (why := torch_cannot_run(settings, gen_path, prm_path, hf)):
        print(f"edgereason: --backend auto runs on llama.cpp: {why}", file=sys.stderr)
        return "llamacpp"
    print(choice.note(), file=sys.stderr)
    return choice.backend


def prm_on_transformers(model: str, choice: PRMChoice) -> bool:
    """An hf: PRM runs on transformers, but for the hf: generator's own weights in a format the
    torch backend's verifier reads: that one shares the generator's weights on torch."""
    if not choice.name.startswith(models.HF_PREFIX):
        return False
    torch_formats = load_backend("torch").capabilities.prm_formats
    return not (choice.name == model and choice.format in torch_formats)


def model_files(
    settings: ModelSettings, choice: PRMChoice, progress: PullProgress | None
) -> tuple[Path, Path]:
    """model_paths; a served setup's servers are asked first: one that is down or serves another
    model is one line, not a failed search after a pull."""
    if settings.remote is not None:
        served = load_backend("remote")
        served.check_servers(
            Placement(remote=settings.remote), settings.model, choice.name, gguf_on_disk
        )
    return model_paths(settings.model, choice, progress)


def gguf_on_disk(name: str, role: str) -> Path | None:
    """The GGUF `name` names, checked; None for a registry model not pulled yet (a look-up that
    must not pull)."""
    if name in models.REGISTRY and not models.is_cached(models.REGISTRY[name]):
        return None
    return models.resolve(name, allow_pull=False, role=role)


def model_paths(model: str, choice: PRMChoice, progress: PullProgress | None) -> tuple[Path, Path]:
    """The generator's weights (`--model`) and the PRM's, pulled where they are registry names not
    on disk yet. An hf: PRM is a folder or a file; a registry name after hf: means its GGUF, read
    into torch."""
    gen_path = _generator_path(model, progress)
    if choice.name == model:
        return gen_path, gen_path
    if choice.name.startswith(models.HF_PREFIX):
        name = choice.name[len(models.HF_PREFIX) :]
        return gen_path, (
            models.resolve(name, progress=progress, role="PRM")
            if name in models.REGISTRY
            else Path(name)
        )
    return gen_path, models.resolve(choice.name, progress=progress, role="PRM")


def _generator_path(model: str, progress: PullProgress | None) -> Path:
    """--model: a registry name or a GGUF; after hf:, a Hugging Face folder for the torch backend
    (or a registry name or a .gguf, read into torch as an hf: PRM's is)."""
    if not model.startswith(models.HF_PREFIX):
        return models.resolve(model, progress=progress)
    name = model[len(models.HF_PREFIX) :]
    if name in models.REGISTRY or name.lower().endswith(".gguf"):
        return models.resolve(name, progress=progress)
    folder = Path(name).expanduser()
    if not folder.is_dir():
        raise ModelError(
            f"--model {model}: {folder} is not a folder; hf: names a Hugging Face model folder "
            "(config.json, *.safetensors and the tokenizer's files)"
        )
    return folder


@dataclass(frozen=True)
class ChosenModels:
    """What a session of the settings runs, decided once: the PRM, both models' files, and the
    backend that runs them (`runtime`), beside transformers for an hf: PRM (`prm_runtime`)."""

    settings: ModelSettings  # with the PRM's format decided
    choice: PRMChoice
    gen_path: Path
    prm: PRMSpec
    backend: str  # llamacpp or torch; remote where the generator is served
    runtime: Backend
    prm_runtime: Backend  # the runtime, or transformers

    @property
    def prm_on_transformers(self) -> bool:
        return self.prm_runtime is not self.runtime
