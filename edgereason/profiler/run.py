"""`memory-profile` end to end: read the device, choose the backend, load both models, settle the
budget, measure the two curves, choose the split. Kept apart from the CLI so tests and start-up can
run it with fewer measurement points. The models are measured through the chosen backend's profiling
objects (protocols.ProfiledGenerator / ProfiledPRM; an hf: PRM through the transformers backend's):
this module knows no concrete backend. The backend is chosen as a solve's session chooses it
(backend_choice.choose_backend: auto = llama.cpp unless torch runs the models on a GPU and was
measured faster for a solve of them there), so that the profile is the one that session looks
up."""

from __future__ import annotations

from dataclasses import dataclass, replace

from edgereason import models
from edgereason.backends import Placement
from edgereason.config import physical_cores
from edgereason.errors import ConfigError
from edgereason.memory.curve import Curve
from edgereason.memory.device import DeviceInfo, auto_budget, read_device
from edgereason.memory.profile_store import check_profile_path, verifier_id
from edgereason.memory.size import format_size, parse_size
from edgereason.memory.split import Workload, budget_error, plan_split, problem_budget_error
from edgereason.profiler.profile import Profile
from edgereason.profiler.sample import prompt_lengths, sample_kv_tokens
from edgereason.profiler.workload import (
    SampleSearch,
    modelled_search,
    sampled_workload,
    with_prompts,
)
from edgereason.protocols import ProfiledGenerator, ProfiledPRM, Progress
from edgereason.session.gpu import device_top_k
from edgereason.session.opening import ChosenModels, choose_models
from edgereason.session.prm_choice import PullProgress
from edgereason.session.settings import DEFAULT_TOP_K, ModelSettings

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
    settings: ModelSettings,
    search: SampleSearch,
    budget: str = "auto",
    points: MeasurePoints | None = None,
    progress: Progress | None = None,
    pull_progress: PullProgress | None = None,
) -> Profile:
    """settings: the models as a session opens them, on the GPU where n_gpu_layers > 0 (every
    layer) else the CPU; the backend is chosen as that session chooses it. Every setting is checked
    before a model loads (after its file is pulled: auto reads it), and the budget before minutes of
    measuring."""
    fixed_budget = None if budget == "auto" else parse_size(budget)
    device = read_device("gpu" if settings.n_gpu_layers else "cpu")
    opened = _open_models(settings, device, search, pull_progress)
    budget_bytes = _settled_budget(
        fixed_budget, device, opened.gen, opened.prm, opened.workload, bool(search.given), progress
    )
    points = points or (GPU_POINTS if device.kind == "gpu" else MeasurePoints())
    return _measure(opened, budget_bytes, points, search, progress)


@dataclass(frozen=True)
class _Opened:
    """The two models loaded on the backend a session of them would choose, and the search modelled
    on them."""

    device: DeviceInfo
    backend: str
    gen_id: str
    ver_id: str
    place: Placement
    gen: ProfiledGenerator
    prm: ProfiledPRM
    workload: Workload  # the modelled search, with its problems' prompt and head lengths


def _open_models(
    settings: ModelSettings,
    device: DeviceInfo,
    search: SampleSearch,
    pull_progress: PullProgress | None,
) -> _Opened:
    """The models' files and backend as a session chooses them, the modelled search checked before
    either model loads, then the generator, the problems' prompts and the PRM."""
    chosen = choose_models(settings, pull_progress)
    runtime, choice = chosen.runtime, chosen.choice
    if "generator" not in runtime.capabilities.profiles:
        raise ConfigError(
            f"memory-profile measures a generator; --backend {chosen.backend} opens none"
        )
    if settings.n_gpu_layers:
        runtime.require_gpu("use --device cpu")
    gen_id, ver_id = models.display_name(settings.model), verifier_id(choice.name, choice.format)
    check_profile_path(device.device_id, gen_id, ver_id, chosen.backend)  # the CLI saves it there
    layers, threads = settings.n_gpu_layers or 0, settings.threads
    place = Placement(
        n_gpu_layers=layers,
        device=DEVICE_FOR[device.kind],
        n_threads=threads,
        torch_weights=settings.torch_weights,
    )
    workload = modelled_search(
        *(search.beams, search.width, search.requests, search.max_step_tokens, search.steps),
        *(device.kind, runtime.capabilities.seq_slots, search.problems),
    )
    gen = runtime.profiled_generator(chosen.gen_path, place)
    problems = search.problems
    lengths = prompt_lengths(gen.prompter, problems, workload.requests)  # before the PRM loads
    prm = _open_prm(chosen, place, workload.requests)
    workload = with_prompts(workload, problems, lengths, prm)
    return _Opened(device, chosen.backend, gen_id, ver_id, place, gen, prm, workload)


def _measure(
    opened: _Opened,
    budget_bytes: int,
    points: MeasurePoints,
    search: SampleSearch,
    progress: Progress | None,
) -> Profile:
    """The two curves, the sample search, and the split they give in `budget_bytes`."""
    gen, prm, place = opened.gen, opened.prm, opened.place
    max_step_tokens, problems = search.max_step_tokens, search.problems
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


def _open_prm(chosen: ChosenModels, place: Placement, requests: int) -> ProfiledPRM:
    """The PRM to measure: the generator's own model or another GGUF on the generator's backend, or
    an hf: PRM through the transformers backend."""
    prm, gen_path = chosen.prm, chosen.gen_path
    if chosen.prm_on_transformers:
        kv_tokens = sample_kv_tokens(requests)
        return chosen.prm_runtime.profiled_prm(prm, place, False, kv_tokens)
    return chosen.runtime.profiled_prm(prm, place, prm.path.resolve() == gen_path.resolve(), 0)
