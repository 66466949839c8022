"""`memory-profile` end to end: read the device, load both models, settle the budget, measure the two curves,
choose the split. Kept apart from the CLI so tests and start-up can run it with fewer measurement points.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, replace
from typing import Callable

from edgereason import models
from edgereason.backends.llamacpp import require_gpu
from edgereason.backends.llamacpp.runtime import load_model, physical_cores
from edgereason.errors import ConfigError
from edgereason.memory.device import DeviceInfo, auto_budget, read_device, weights_bytes
from edgereason.memory.measure import Curve, Progress, measure_decode, measure_prefill
from edgereason.memory.sample import SAMPLE_PROBLEMS, sample_search
from edgereason.memory.size import format_size, parse_size
from edgereason.memory.split import SplitPlan, Workload, budget_error, plan_split
from edgereason.memory.store import verifier_id
from edgereason.prm_choice import choose_prm

PROFILE_VERSION = 1
ALL_GPU_LAYERS = 999


@dataclass(frozen=True)
class MeasurePoints:
    decode_seqs: tuple[int, ...] = (1, 2, 4, 8, 16)
    decode_steps: int = 8
    prefill_tokens: tuple[int, ...] = (64, 128, 256, 512, 1024)
    prefill_reps: int = 3


# A GPU keeps gaining from far larger batches (SpecScale saw PRM prefill saturate near 2,048 tokens).
GPU_POINTS = MeasurePoints((1, 2, 4, 8, 16, 32, 64), 8, (128, 256, 512, 1024, 2048, 4096, 8192), 3)
DEFAULT_BEAMS = {"cpu": 4, "gpu": 8}  # design.md section 3
TYPICAL_STEP_TOKENS = 64  # for the budget check before the sample search measures the real step length


@dataclass(frozen=True)
class Profile:
    device: DeviceInfo
    generator: str
    verifier: str
    threads: int
    budget_bytes: int
    gen_bytes_per_token: int
    ver_bytes_per_token: int
    workload: Workload
    gen_curve: Curve
    ver_curve: Curve
    plan: SplitPlan

    @property
    def lv_threshold_tokens(self) -> int:
        """Lazy verification flushes at the batch where PRM prefill reaches 90% of its best throughput."""
        return self.ver_curve.saturation(0.9)

    def to_dict(self) -> dict:
        best, w = self.plan.best, self.workload
        return {
            "version": PROFILE_VERSION,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "device": self.device.device_id,
            "device_name": self.device.name,
            "device_memory_bytes": self.device.total_bytes,
            "generator": self.generator,
            "verifier": self.verifier,
            "threads": self.threads,
            "budget_bytes": self.budget_bytes,
            "generator_kv_tokens": best.generator_kv_tokens,
            "verifier_kv_tokens": best.verifier_kv_tokens,
            "generator_kv_bytes": best.generator_kv_tokens * self.gen_bytes_per_token,
            "verifier_kv_bytes": best.verifier_kv_tokens * self.ver_bytes_per_token,
            "generator_kv_bytes_per_token": self.gen_bytes_per_token,
            "verifier_kv_bytes_per_token": self.ver_bytes_per_token,
            "lv_threshold_tokens": self.lv_threshold_tokens,
            "curves": {"generator": self.gen_curve.as_list(), "verifier": self.ver_curve.as_list()},
            "workload": asdict(w),
            "predicted": {"best": best.to_dict(w), "even": self.plan.even.to_dict(w),
                          "speedup_vs_even": _round(self.plan.speedup_vs_even)},
            "splits": [row.to_dict(w) for row in self.plan.rows],
        }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def run_profile(generator: str, prm: str | None, prm_format: str = "auto", budget: str = "auto",
                device_kind: str = "cpu", threads: int | None = None, beams: int | None = None,
                max_step_tokens: int = 96, width: int = 4, requests: int = 1, steps: int = 4,
                problems: tuple[str, ...] = SAMPLE_PROBLEMS,
                points: MeasurePoints | None = None, progress: Progress | None = None,
                pull_progress: Callable[[str, int, int], None] | None = None,
                prm_head: str | None = None) -> Profile:
    if threads is not None and threads <= 0:
        raise ConfigError(f"--threads must be positive, got {threads}")
    choice = choose_prm(generator, prm, prm_format, prm_head)  # bad settings fail now, not after measuring
    fixed_budget = None if budget == "auto" else parse_size(budget)
    device = read_device(device_kind)
    if min(beams or 1, width, requests, max_step_tokens, steps) <= 0:
        raise ConfigError("--beams, --width, --requests, --steps and --max-step-tokens must be positive")
    workload = Workload(beams=DEFAULT_BEAMS[device.kind] if beams is None else beams, width=width,
                        requests=requests, step_tokens=min(TYPICAL_STEP_TOKENS, max_step_tokens), steps=steps)
    gen_path = models.resolve(generator, progress=pull_progress)
    prm_path = gen_path if choice.name == generator else models.resolve(choice.name, progress=pull_progress,
                                                                         role="PRM")
    if device.kind == "gpu":
        require_gpu("use --device cpu")
    n_gpu_layers = ALL_GPU_LAYERS if device.kind == "gpu" else 0
    gen_model = load_model(str(gen_path), n_gpu_layers)
    prm_model = load_model(str(prm_path), n_gpu_layers)
    gen_bpt, ver_bpt = gen_model.kv_bytes_per_token, prm_model.kv_bytes_per_token
    budget_bytes = fixed_budget or auto_budget(device.free_bytes, weights_bytes(gen_path, prm_path), gen_bpt,
                                               ver_bpt)
    if budget_bytes < workload.min_budget_bytes(gen_bpt, ver_bpt):  # fail before minutes of measuring
        raise budget_error(budget_bytes, gen_bpt, ver_bpt, workload)
    if progress and budget_bytes > device.free_bytes:
        progress(f"warning: the budget is more than the {format_size(device.free_bytes)} free on this device")
    points = points or (GPU_POINTS if device.kind == "gpu" else MeasurePoints())
    gen_curve = measure_decode(gen_model, points.decode_seqs, points.decode_steps, threads, progress)
    ver_curve = measure_prefill(prm_model, points.prefill_tokens, points.prefill_reps, threads, progress)
    if progress:
        progress(f"sample search: {workload.requests} x {workload.beams} beams, width {workload.width}, "
                 f"{workload.steps} steps")
    sample = sample_search(gen_model, prm_model, choice.format, workload.beams, workload.width, workload.steps,
                           max_step_tokens, threads, workload.requests, problems, choice.head)
    workload = replace(workload, **asdict(sample))  # the sample's fields are Workload's measured fields
    if progress:
        progress(f"sample search: {sample.step_tokens} tokens a step; KV in use at most "
                 f"{sample.generator_peak_tokens} generator, {sample.verifier_peak_tokens} PRM tokens")
    plan = plan_split(budget_bytes, gen_bpt, ver_bpt, gen_curve, ver_curve, workload)
    return Profile(device, models.display_name(generator), verifier_id(choice.name, choice.format),
                   threads or physical_cores(), budget_bytes, gen_bpt, ver_bpt, workload, gen_curve, ver_curve,
                   plan)
