"""Flags shared by solve, chat and bench, and their conversion into settings."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields

from edgereason import models
from edgereason.config import AGGREGATIONS, STRATEGIES, VOTES, SamplingParams, SearchConfig
from edgereason.policy import PRESETS, Policy, parse_policy, with_switches
from edgereason.memory import parse_size
from edgereason.session import DEFAULT_KV_TOKENS, SPLITS, ModelSettings


def add_model_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("models")
    g.add_argument("--model", default=models.DEFAULT_MODEL,
                   help=f"generator: a registry name ({', '.join(models.REGISTRY)}) or a .gguf path "
                        f"(default {models.DEFAULT_MODEL})")
    g.add_argument("--prm", default=None, help="PRM model name or .gguf path (default: the generator judges)")
    g.add_argument("--prm-format", default="judge", choices=["judge", "rlhflow"],
                   help="how the PRM is prompted and read (default judge)")
    g.add_argument("--threads", type=int, default=None, help="CPU threads (default: physical cores)")
    g.add_argument("--gpu-layers", type=int, default=0, metavar="N",
                   help="layers to offload to the GPU, 999 = all (default 0; needs llama-cpp-python built with "
                        "CUDA)")
    g.add_argument("--kv-tokens", type=int, default=DEFAULT_KV_TOKENS,
                   help=f"KV cache tokens per model (default {DEFAULT_KV_TOKENS})")
    g.add_argument("--kv-budget", default=None, metavar="SIZE",
                   help="KV memory of both models together, e.g. 24MiB or 1GiB (overrides --kv-tokens)")
    g.add_argument("--flash-attn", action=argparse.BooleanOptionalAction, default=True,
                   help="flash attention: much faster once many KV cells are in use; --no-flash-attn makes "
                        "incremental PRM scoring bit-exact (default on)")
    g.add_argument("--split", default="profile", choices=SPLITS,
                   help="how --kv-budget is split: by this device's memory profile, or evenly (default profile)")


def add_search_args(p: argparse.ArgumentParser, beams_default: int = 4) -> None:
    g = p.add_argument_group("search")
    g.add_argument("--strategy", default="beam", choices=STRATEGIES, help="search strategy (default beam)")
    g.add_argument("--beams", type=int, default=beams_default, help=f"beam size N (default {beams_default})")
    g.add_argument("--width", type=int, default=4, help="beam width M: children per kept candidate (default 4)")
    g.add_argument("--max-steps", type=int, default=40, help="reasoning steps per path (default 40)")
    g.add_argument("--max-step-tokens", type=int, default=2048, help="tokens per step (default 2048)")
    g.add_argument("--max-tokens", type=int, default=4096, help="generated tokens per path (default 4096)")
    g.add_argument("--temperature", type=float, default=0.8, help="sampling temperature, 0 = greedy (default 0.8)")
    g.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling (default 1.0)")
    g.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    g.add_argument("--agg", default="last", choices=AGGREGATIONS, help="step-score aggregation (default last)")
    g.add_argument("--vote", default="best", choices=VOTES,
                   help="final answer: best path or weighted majority (default best)")


def add_policy_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy", default="baseline",
                   help=f"engine policy PRESET[:key=value...]; presets: {', '.join(PRESETS)} (default baseline)")
    add_switch_args(p)


def add_switch_args(p: argparse.ArgumentParser) -> None:
    """One flag per technique switch; a given flag overrides the preset's value."""
    g = p.add_argument_group("policy switches (override the preset)")
    for f in fields(Policy):
        if f.name == "name":
            continue
        flag = "--" + f.name.replace("_", "-")
        if "bool" in str(f.type):
            g.add_argument(flag, dest=f"switch_{f.name}", action=argparse.BooleanOptionalAction, default=None)
        elif f.name == "order":
            g.add_argument(flag, dest=f"switch_{f.name}", choices=["prefix", "fifo"], default=None,
                           help="scheduling order when KV memory is short")
        else:
            kind = float if "float" in str(f.type) else int
            g.add_argument(flag, dest=f"switch_{f.name}", type=kind, default=None)


def policy_from(args: argparse.Namespace, spec: str | None = None) -> Policy:
    changes = {k[len("switch_"):]: v for k, v in vars(args).items() if k.startswith("switch_") and v is not None}
    return with_switches(parse_policy(spec if spec is not None else args.policy), changes)


def model_settings(args: argparse.Namespace) -> ModelSettings:
    budget = parse_size(args.kv_budget) if args.kv_budget else None
    return ModelSettings(model=args.model, prm=args.prm, prm_format=args.prm_format, threads=args.threads,
                         generator_kv_tokens=args.kv_tokens, verifier_kv_tokens=args.kv_tokens,
                         kv_budget_bytes=budget, split=args.split, flash_attn=args.flash_attn,
                         n_gpu_layers=args.gpu_layers)


def search_config(args: argparse.Namespace) -> SearchConfig:
    return SearchConfig(
        strategy=args.strategy, beams=args.beams, width=args.width, max_steps=args.max_steps,
        max_step_tokens=args.max_step_tokens, max_path_tokens=args.max_tokens, aggregation=args.agg,
        vote=args.vote, sampling=SamplingParams(temperature=args.temperature, top_p=args.top_p, seed=args.seed))


def pull_progress(label: str, done: int, total: int) -> None:
    """Progress for a first-use model download, on stderr so JSON output stays clean."""
    width = 24
    filled = int(width * done / max(1, total))
    print(f"\rpulling model: [{'#' * filled}{'.' * (width - filled)}] {label}", end="", file=sys.stderr,
          flush=True)
    if done >= total:
        print(file=sys.stderr)
