"""The shared flags' conversion into settings (the flags themselves: flags_models, flags_remote,
flags_search)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from edgereason.cli.flags_remote import remote_settings
from edgereason.config import SamplingParams, SearchConfig
from edgereason.engine.policy import Policy, parse_policy, with_switches
from edgereason.errors import ConfigError
from edgereason.memory import parse_size
from edgereason.memory.size import size_unit
from edgereason.session.settings import ModelSettings

# the sequences a local generator runs at once, one a beam: llama.cpp's LLAMA_MAX_SEQ, and the torch
# backend's SEQ_SLOTS as its (a test holds them equal); a served generator's are the server's
LOCAL_MAX_BEAMS = 256


def policy_from(args: argparse.Namespace, spec: str | None = None) -> Policy:
    changes = {
        k[len("switch_") :]: v
        for k, v in vars(args).items()
        if k.startswith("switch_") and v is not None
    }
    return with_switches(parse_policy(spec if spec is not None else args.policy), changes)


def check_beams_before_loading(beams: int, settings: ModelSettings) -> None:
    """ConfigError for more beams than a local generator runs at once, before its model loads (the
    engine's own check came only after the model's load, tens of seconds for the 1.5B)."""
    served = settings.remote is not None and bool(settings.remote.generator)
    if beams > LOCAL_MAX_BEAMS and not served:
        most = f"{LOCAL_MAX_BEAMS} sequences, one a beam"
        pick = f"pick --beams {LOCAL_MAX_BEAMS} or fewer"
        raise ConfigError(
            f"--beams {beams} is more than a local generator runs at once: {most}; {pick}"
        )


def model_settings(args: argparse.Namespace) -> ModelSettings:
    from edgereason.backends.torch.int4_choice import choose

    choose(args.torch_weights)  # the process's choice, read where the torch backend loads
    # "" is a mistake, not unset
    budget = parse_size(args.kv_budget) if args.kv_budget is not None else None
    return ModelSettings(
        model=args.model,
        prm=args.prm,
        prm_format=args.prm_format,
        prm_head=args.prm_head,
        prm_device=args.prm_device,
        threads=args.threads,
        generator_kv_tokens=args.kv_tokens,
        verifier_kv_tokens=args.kv_tokens,
        kv_budget_bytes=budget,
        split=args.split,
        flash_attn=args.flash_attn,
        n_gpu_layers=args.gpu_layers,
        verbose=args.verbose,
        gpu_memory_bytes=parse_size(args.gpu_memory) if args.gpu_memory is not None else None,
        device_sampling=args.device_sampling,
        device_top_k=args.device_top_k,
        kv_budget_unit=size_unit(args.kv_budget) if budget is not None else "MiB",
        remote=remote_settings(args),
        backend="auto" if args.backend == "remote" else args.backend,
    )


def search_config(flags: Mapping[str, Any]) -> SearchConfig:
    """The search the flags' values name (`vars(args)`, or those values with a recipe's)."""
    return SearchConfig(
        strategy=flags["strategy"],
        beams=flags["beams"],
        width=flags["width"],
        max_steps=flags["max_steps"],
        max_step_tokens=flags["max_step_tokens"],
        max_path_tokens=flags["max_tokens"],
        aggregation=flags["agg"],
        vote=flags["vote"],
        select=flags["select"],
        sampling=SamplingParams(
            temperature=flags["temperature"], top_p=flags["top_p"], seed=flags["seed"]
        ),
    )
