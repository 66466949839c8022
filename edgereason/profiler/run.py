"""`memory-profile` end to end: read the device, choose the backend, load both models, settle the
budget, measure the two curves, choose the split. Kept apart from the CLI so tests and start-up can
run it with fewer measurement points. The models are measured through the chosen backend's profiling
objects (protocols.ProfiledGenerator / ProfiledPRM; an hf: PRM through the transformers backend's):
this module knows no concrete backend. The backend is chosen as a solve's session chooses it
(backend_choice.choose_backend: auto = llama.cpp unless torch runs the models on a GPU and was
measured faster for a solve of them there), so that the profile is the one that session looks
up."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from edgereason import models
from edgereason.backends import Backend, Placement, PRMSpec, load_backend
from edgereason.config import check_threads, physical_cores
from edgereason.errors import ConfigError
from edgereason.memory.curve import Curve
from edgereason.memory.device import DeviceInfo, auto_budget, read_device
from edgereason.memory.profile_store import check_profile_path, verifier_id
from edgereason.memory.size import format_size, parse_size
from edgereason.memory.split import Workload, budget_error, plan_split, problem_budget_error
from edgereason.profiler.profile import Profile
from edgereason.profiler.sample import SAMPLE_PROBLEMS, prompt_lengths, sample_kv_tokens
from edgereason.profiler.workload import modelled_search, sampled_workload, with_prompts
from edgereason.protocols import ProfiledGenerator, ProfiledPRM, Progress
from edgereason.session.backend_choice import choose_backend, model_paths
from edgereason.session.gpu import device_top_k
from edgereason.session.prm_choice import PRMChoice, choose_prm
from edgereason.session.settings import DEFAULT_TOP_K, ModelSettings

PullProgress = Callable[[str, int, int], None]

ALL_GPU_LAYERS = 999
DEVICE_FOR = {"cpu": "cpu", "gpu": "cuda"}  # profiled device kind -> an hf: PRM's torch device


@dataclass(frozen=True)
class MeasurePoints:
    decode_seqs: tuple[int, ...] = (1, 2, 4, 8, 16)
    decode_steps: int = 8
    prefill_tokens: tuple[int, ...] = (64, 128, 256, 512, 1024)
    prefill_reps: int = 3


# A GPU keeps gaining from far larger batches (SpecScale saw PRM prefill saturate near 2,048
# tokens).
GPU_POINTS = MeasurePoints((1, 2, 4, 8, 16, 32, 64), 8, (128, 256, 512, 1024, 2048, 4096, 8192), 3)
# measure_decode holds every point's sequences at once: 255 with GPU_POINTS, llama.cpp's cap 256
MAX_DECODE_SEQS = 128


def run_profile(
    generator: str,
    prm: str | None,
    prm_format: str = "auto",
    budget: str = "auto",
    device_kind: str = "cpu",
    threads: int | None = None,
    beams: int | None = None,
    max_step_tokens: int = 96,
    width: int = 4,
    requests: int = 1,
    steps: int = 4,
    problems: tuple[str, ...] = (),
    points: MeasurePoints | None = None,
    progress: Progress | None = None,
    pull_progress: PullProgress | None = None,
    prm_head: str | None = None,
    backend: str = "auto",
) -> Profile:
    """problems: the sample search's (the --problem texts); none: SAMPLE_PROBLEMS. backend: auto,
    llamacpp or torch. Every setting is checked before a model loads (after its file is pulled: auto
    reads it), and the budget before minutes of measuring."""
    given, problems = bool(problems), problems or SAMPLE_PROBLEMS
    check_threads(threads)
    # bad settings fail now, not after measuring
    choice = choose_prm(generator, prm, prm_format, prm_head)
    fixed_budget = None if budget == "auto" else parse_size(budget)
    device = read_device(device_kind)
    n_gpu_layers = ALL_GPU_LAYERS if device.kind == "gpu" else 0
    place = Placement(n_gpu_layers=n_gpu_layers, device=DEVICE_FOR[device.kind], n_threads=threads)
    shape = (beams, width, requests, max_step_tokens, steps)
    opened = _open_models(generator, choice, backend, device, place, shape, problems, pull_progress)
    budget_bytes = _settled_budget(
        fixed_budget, device, opened.gen, opened.prm, opened.workload, given, progress
    )
    points = points or (GPU_POINTS if device.kind == "gpu" else MeasurePoints())
    return _measure(opened, budget_bytes, points, place, max_step_tokens, problems, progress)


@dataclass(frozen=True)
class _Opened:
    """The two models loaded on the backend a session of them would choose, and the search modelled
    on them."""

    device: DeviceInfo
    backend: str
    gen_id: str
    ver_id: str
    gen: ProfiledGenerator
    prm: ProfiledPRM
    workload: Workload  # the modelled search, with its problems' prompt and head lengths


def _open_models(
    generator: str,
    choice: PRMChoice,
    backend: str,
    device: DeviceInfo,
    place: Placement,
    shape: tuple[int | None, int, int, int, int],
    problems: tuple[str, ...],
    pull_progress: PullProgress | None,
) -> _Opened:
    """The models' files and backend, the modelled search of `shape` (beams, width, requests, max
    step tokens, steps) checked before either model loads, then the generator, the problems' prompts
    and the PRM."""
    threads, n_gpu_layers = place.n_threads, place.n_gpu_layers
    gen_path, prm_path, backend = _models_and_backend(
        generator, choice, backend, threads, n_gpu_layers, pull_progress
    )
    gen_id, ver_id = models.display_name(generator), verifier_id(choice.name, choice.format)
    check_profile_path(device.device_id, gen_id, ver_id, backend)  # the CLI saves the profile there
    runtime = load_backend(backend)
    workload = modelled_search(*shape, device.kind, runtime.capabilities.seq_slots, problems)
    gen = runtime.profiled_generator(gen_path, place)
    lengths = prompt_lengths(gen.prompter, problems, workload.requests)  # before the PRM loads
    prm = _open_prm(runtime, choice, gen_path, prm_path, place, workload.requests)
    return _Opened(
        device, backend, gen_id, ver_id, gen, prm, with_prompts(workload, problems, lengths, prm)
    )


def _measure(
    opened: _Opened,
    budget_bytes: int,
    points: MeasurePoints,
    place: Placement,
    max_step_tokens: int,
    problems: tuple[str, ...],
    progress: Progress | None,
) -> Profile:
    """The two curves, the sample search, and the split they give in `budget_bytes`."""
    gen, prm = opened.gen, opened.prm
    gen_curve, ver_curve = _curves(
        gen, prm, points, opened.workload, place.n_gpu_layers, place.n_threads, progress
    )
    workload = sampled_workload(gen, prm, opened.workload, max_step_tokens, problems, progress)
    plan = plan_split(
        budget_bytes, gen.bytes_per_token, prm.bytes_per_token, gen_curve, ver_curve, workload
    )
    return Profile(
        opened.device,
        opened.backend,
        opened.gen_id,
        opened.ver_id,
        place.n_threads or physical_cores(),
        budget_bytes,
        gen.bytes_per_token,
        prm.bytes_per_token,
        gen.weights_bytes,
        prm.weights_bytes,
        workload,
        gen_curve,
        ver_curve,
        plan,
    )


def _models_and_backend(
    generator: str,
    choice: PRMChoice,
    backend: str,
    threads: int | None,
    n_gpu_layers: int,
    pull_progress: PullProgress | None,
) -> tuple[Path, Path, str]:
    """The models' files (pulled where needed) and the backend that runs them, chosen as a session
    of these models on this device chooses it (auto reads their architectures), so that the profile
    is the one it looks up."""
    settings = ModelSettings(
        model=generator,
        prm=choice.name,  # with its format: the models a solve's measured speeds are kept under
        prm_format=choice.format,
        threads=threads,
        n_gpu_layers=n_gpu_layers,
        backend=backend,
    )
    gen_path, prm_path = model_paths(settings.model, choice, pull_progress)
    backend = choose_backend(settings, gen_path, prm_path, choice.name.startswith(models.HF_PREFIX))
    runtime = load_backend(backend)
    if not (runtime.capabilities.can_profile and "generator" in runtime.capabilities.roles):
        raise ConfigError(f"memory-profile measures a generator; --backend {backend} opens none")
    if n_gpu_layers:
        runtime.require_gpu("use --device cpu")
    return gen_path, prm_path, backend


def _curves(
    gen: ProfiledGenerator,
    prm: ProfiledPRM,
    points: MeasurePoints,
    workload: Workload,
    n_gpu_layers: int,
    threads: int | None,
    progress: Progress | None,
) -> tuple[Curve, Curve]:
    """Generator decode against concurrent sequences, PRM prefill against batch tokens."""
    # up to every sequence of the workload at once: the split model reads the curve at R*N (clamped
    # beyond it)
    decode_seqs = sorted(set(points.decode_seqs) | {min(workload.sequences, MAX_DECODE_SEQS)})
    # the generator's rows as a session cuts them
    top_k = device_top_k("auto", DEFAULT_TOP_K, n_gpu_layers)
    gen_curve = Curve(gen.decode(decode_seqs, points.decode_steps, threads, progress, top_k))
    ver_curve = Curve(prm.measure(points.prefill_tokens, points.prefill_reps, threads, progress))
    return gen_curve, ver_curve


def _settled_budget(
    fixed_budget: int | None,
    device: DeviceInfo,
    gen: ProfiledGenerator,
    prm: ProfiledPRM,
    workload: Workload,
    problems_given: bool,
    progress: Progress | None,
) -> int:
    """The given budget, else what the device's free memory leaves beside both models' weights;
    checked to hold one path before minutes of measuring."""
    budget_bytes = fixed_budget or auto_budget(
        device.free_bytes,
        gen.weights_bytes + prm.weights_bytes,
        gen.bytes_per_token,
        prm.bytes_per_token,
    )
    _check_budget(budget_bytes, gen.bytes_per_token, prm.bytes_per_token, workload, problems_given)
    if progress and budget_bytes > device.free_bytes:
        progress(
            f"warning: the budget is more than the {format_size(device.free_bytes)} free on this "
            "device"
        )
    return budget_bytes


def _check_budget(
    budget_bytes: int, gen_bpt: int, ver_bpt: int, w: Workload, problems_given: bool
) -> None:
    """One path fits the budget. Where the budget would hold one of a typical problem, the --problem
    texts are what is too long, and the error says so."""
    if budget_bytes >= w.min_budget_bytes(gen_bpt, ver_bpt):
        return
    typical = replace(w, prompt_tokens=Workload.prompt_tokens, head_tokens=Workload.head_tokens)
    if problems_given and budget_bytes >= typical.min_budget_bytes(gen_bpt, ver_bpt):
        raise problem_budget_error(budget_bytes, gen_bpt, ver_bpt, w)
    raise budget_error(budget_bytes, gen_bpt, ver_bpt, w)


def _open_prm(
    runtime: Backend,
    choice: PRMChoice,
    gen_path: Path,
    prm_path: Path,
    place: Placement,
    requests: int,
) -> ProfiledPRM:
    """The PRM to measure: the generator's own model or another GGUF on the generator's backend, or
    an hf: PRM on torch through the transformers backend."""
    prm = PRMSpec(prm_path, choice.format, choice.head)
    if choice.name.startswith(models.HF_PREFIX):
        kv_tokens = sample_kv_tokens(requests)
        return load_backend("transformers").profiled_prm(prm, place, False, kv_tokens)
    return runtime.profiled_prm(prm, place, prm_path.resolve() == gen_path.resolve(), 0)
