"""`edgereason memory-profile`: measure both models on this device, on the backend a session of them
would run (`--backend auto|llamacpp|torch`, decided as solve decides it), and choose how the KV
budget is split. The profile records the backend and is saved under it: a session finds only a
profile of its own backend."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from edgereason import models
from edgereason.backends.cxx_runtime import require_one_cxx_runtime
from edgereason.cli.flags_search import beam_count
from edgereason.cli.help import brief
from edgereason.cli.progress import pull_progress
from edgereason.errors import ConfigError
from edgereason.memory.device import DEVICE_KINDS
from edgereason.memory.profile_store import check_profiles_dir, write_profile
from edgereason.memory.size import format_size
from edgereason.memory.split import Prediction
from edgereason.profiler.profile import Profile
from edgereason.profiler.run import run_profile
from edgereason.profiler.workload import SampleSearch
from edgereason.session.gpu import ALL_LAYERS
from edgereason.session.prm_choice import PRM_FORMAT_CHOICES
from edgereason.session.settings import LOCAL_BACKENDS, ModelSettings
from edgereason.util.files import check_no_dangling_link
from edgereason.util.terminal import shown_path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "memory-profile",
        help="measure the models and choose the generator/PRM split of the KV memory",
        description="Measures generator decode throughput against concurrent sequences and PRM "
        "prefill throughput against batch tokens on the chosen backend, predicts the search step "
        "time of each split of the KV budget, and writes the best split to "
        "$EDGEREASON_HOME/profiles/ for start-up to reuse (by sessions of the same device, models "
        "and backend).",
    )
    _add_model_flags(p)
    _add_workload_flags(p)
    p.add_argument("--json", action="store_true", help="print the profile as JSON")
    p.add_argument(
        "--plot", type=Path, default=None, metavar="FILE", help="write the curves to a PNG"
    )
    brief(p, "memory-profile")
    p.set_defaults(func=run)


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    """The models to profile, the KV budget to split, and where they run."""
    # --generator and --budget: the flags' first names, kept working
    p.add_argument(
        "--model",
        "--generator",
        dest="model",
        default=models.DEFAULT_MODEL,
        help=f"generator: a registry name or a .gguf path (default {models.DEFAULT_MODEL})",
    )
    p.add_argument(
        "--prm",
        default=None,
        metavar="NAME|PATH|self|hf:PATH",
        help="PRM weights (default self: the generator's own), as in solve; an hf: PRM runs on "
        "torch on the profiled device (CUDA for --device gpu)",
    )
    p.add_argument(
        "--prm-format",
        default="auto",
        choices=PRM_FORMAT_CHOICES,
        help="how the PRM is read, as in solve (default auto: the shipped value head, else judge)",
    )
    p.add_argument(
        "--prm-head", default=None, metavar="FILE", help="value head for --prm-format head"
    )
    p.add_argument(
        "--kv-budget",
        "--budget",
        dest="kv_budget",
        default="auto",
        metavar="SIZE",
        help="KV memory for both models, e.g. 24MiB, 1.5GiB, 512M; auto = free memory after the "
        "weights, less a margin (default auto)",
    )
    p.add_argument(
        "--device", default="cpu", choices=DEVICE_KINDS, help="where the models run (default cpu)"
    )
    p.add_argument(
        "--backend",
        default="auto",
        choices=LOCAL_BACKENDS,
        help="the runtime measured, as in solve: torch (CUDA; on a CPU it runs, slowly, for "
        "tests), llamacpp, auto = as solve decides it (llamacpp where its build runs on the GPU, "
        "else torch on --device gpu where CUDA torch is installed and runs the models, else "
        "llamacpp); a session uses the profile of its own backend (default auto)",
    )
    p.add_argument(
        "--threads", type=int, default=None, help="CPU threads (default: physical cores)"
    )


def _add_workload_flags(p: argparse.ArgumentParser) -> None:
    """The search the split is chosen for, and the sample search that measures it."""
    p.add_argument(
        "--beams",
        type=beam_count,
        default=None,
        metavar="N",
        help="beam size N of the modelled search (default 4 on cpu, 8 on gpu)",
    )
    p.add_argument(
        "--width",
        type=int,
        default=SampleSearch.width,
        help="beam width M of the modelled search (default %(default)s)",
    )
    p.add_argument(
        "--requests",
        type=int,
        default=SampleSearch.requests,
        help="searches running at once, e.g. a bench's concurrent problems (default %(default)s)",
    )
    p.add_argument(
        "--problem",
        action="append",
        default=None,
        metavar="TEXT",
        help="a problem for the sample search, one like those you solve; repeat for more: "
        "concurrent searches take them in turn (default: four short word problems)",
    )
    p.add_argument(
        "--max-step-tokens",
        type=int,
        default=SampleSearch.max_step_tokens,
        help="tokens a step may take in the sample search that measures the workload (default "
        "%(default)s)",
    )
    p.add_argument(
        "--steps",
        type=int,
        default=SampleSearch.steps,
        help="steps of a modelled search (default %(default)s)",
    )


def _progress(message: str) -> None:
    print(f"memory-profile: {message}", file=sys.stderr, flush=True)


def _row(r: Prediction) -> str:
    head = f"{100 * r.generator_share:5.0f}%  {r.generator_kv_tokens:>9}  {r.verifier_kv_tokens:>9}"
    if not r.feasible:
        return f"{head}  {'infeasible':>10}"
    return (
        f"{head}  {r.concurrent_seqs:>4}  {r.held_paths:>4}  {r.verifier_call_tokens:>8.0f}  "
        f"{r.gen_time_s:>7.2f}  {r.prm_time_s:>7.2f}  {r.step_time_s:>7.2f}"
    )


def _prm_weights(profile: Profile) -> str:
    return (
        format_size(profile.ver_weights_bytes) if profile.ver_weights_bytes else "the generator's"
    )


def _print_table(profile: Profile, path: Path) -> None:
    w, plan, best = profile.workload, profile.plan, profile.plan.best
    print(
        f"device {profile.device.device_id} ({profile.device.name}), backend {profile.backend}, KV "
        f"budget {format_size(profile.budget_bytes)}, {w.requests} x {w.beams} beams (width "
        f"{w.width}), {w.steps} steps of {w.step_tokens} tokens; KV in use at most "
        f"{w.generator_peak_tokens} (generator) and {w.verifier_peak_tokens} (PRM) tokens"
    )
    print(
        f"generator {profile.generator}: {format_size(profile.gen_bytes_per_token)}/token, weights "
        f"{format_size(profile.gen_weights_bytes)}; PRM {profile.verifier}: "
        f"{format_size(profile.ver_bytes_per_token)}/token, weights {_prm_weights(profile)}\n"
    )
    print("  gen %  gen KV tok  PRM KV tok  seqs  held  PRM call   gen s    PRM s   step s")
    for r in plan.rows:
        mark = "  <- chosen" if r is best else ("  (even)" if r is plan.even else "")
        print(_row(r) + mark)
    versus = (
        f", {plan.speedup_vs_even:.2f}x the even split ({plan.even.step_time_s:.2f} s)"
        if plan.speedup_vs_even
        else ", the even split cannot run"
    )
    print(
        f"\nchosen: generator {100 * best.generator_share:.0f}% = {best.generator_kv_tokens} "
        f"tokens ({format_size(best.generator_kv_tokens * profile.gen_bytes_per_token)}), PRM "
        f"{best.verifier_kv_tokens} tokens "
        f"({format_size(best.verifier_kv_tokens * profile.ver_bytes_per_token)}); predicted "
        f"{best.step_time_s:.2f} s per step{versus}"
    )
    print(f"lazy verification threshold: {profile.lv_threshold_tokens} tokens")
    print(f"profile: {shown_path(path)}")


def _check_plot(path: Path) -> None:
    """Before minutes of measuring: the plot can be written where the user asked."""
    check_no_dangling_link("--plot", path)
    if path.is_dir():
        raise ConfigError(
            f"--plot {path} is a folder; give a file name such as {path / 'memory-profile.png'}"
        )
    if path.suffix.lower() != ".png":
        raise ConfigError(f"--plot writes a PNG: give a file name ending in .png, got {path}")
    if path.parent.exists() and not path.parent.is_dir():
        raise ConfigError(f"--plot {path}: {path.parent} is a file, not a folder")
    if not path.parent.is_dir():
        raise ConfigError(f"--plot {path}: the folder {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK):
        raise ConfigError(f"--plot {path}: cannot write in {path.parent}")
    # a folder's permission does not cover its files
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(
            f"--plot {path}: the file is there and cannot be written; check its permissions or "
            "give another file name"
        )


def run(args: argparse.Namespace) -> int:
    check_profiles_dir()
    if args.plot:
        _check_plot(args.plot)
        require_one_cxx_runtime("--plot loads matplotlib", "drop --plot")
    profile = run_profile(
        _settings(args),
        SampleSearch(
            args.beams,
            args.width,
            args.requests,
            args.max_step_tokens,
            args.steps,
            tuple(args.problem or ()),
        ),
        args.kv_budget,
        progress=_progress,
        pull_progress=pull_progress,
    )
    data = profile.to_dict()
    path = write_profile(
        data, profile.device.device_id, profile.generator, profile.verifier, profile.backend
    )
    if args.plot:
        from edgereason.profiler.plot import write_plot

        try:
            write_plot(profile, args.plot)
        except OSError as e:  # the profile itself is saved already
            raise ConfigError(
                f"profile saved to {path}, but the plot could not be written to {args.plot}: "
                f"{e.strerror or e}"
            ) from None
        _progress(f"plot written to {shown_path(args.plot)}")
    if args.json:
        print(json.dumps(data | {"profile_path": str(path)}, indent=2))
    else:
        _print_table(profile, path)
    return 0


def _settings(args: argparse.Namespace) -> ModelSettings:
    """The models as a session of them opens them, on the device profiled: every layer on the GPU,
    or the CPU."""
    return ModelSettings(
        model=args.model,
        prm=args.prm,
        prm_format=args.prm_format,
        prm_head=args.prm_head,
        threads=args.threads,
        n_gpu_layers=ALL_LAYERS if args.device == "gpu" else 0,
        backend=args.backend,
    )
