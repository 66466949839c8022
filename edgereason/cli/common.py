"""Flags shared by solve, chat and bench, and their conversion into settings."""

from __future__ import annotations

import argparse
from dataclasses import fields

from edgereason import models
from edgereason.backends.remote.settings import DEFAULT_STEP_TOKENS, Endpoint, RemoteSettings, check_url
from edgereason.config import AGGREGATIONS, SELECTS, STRATEGY_NAMES, VOTES, SamplingParams, SearchConfig
from edgereason.engine.policy import PRESETS, SWITCH_HELP, SWITCH_METAVAR, Policy, parse_policy, with_switches
from edgereason.errors import ConfigError
from edgereason.memory import parse_size
from edgereason.memory.size import size_unit
from edgereason.search.recipes import describe
from edgereason.session.auto_policy import EDGE_MAX_COST_8
from edgereason.session.gpu import DEFAULT_TOP_K, DEVICE_SAMPLING_MODES
from edgereason.session.prm_choice import PRM_FORMAT_CHOICES
from edgereason.session.settings import DEFAULT_KV_TOKENS, SPLITS, ModelSettings

# flags only beam and dvts read, with SearchConfig's defaults
TREE_FLAGS = {f: getattr(SearchConfig, f) for f in ("width", "select")}

REMOTE_HELP = """\
The generator and/or the PRM served by an OpenAI-compatible server (llama.cpp's llama-server, vLLM, SGLang,
llama-cpp-python's server). --model and --prm then name the served models' GGUFs, read here for their
tokenizer and chat template only. What each technique becomes on a server: deduplication = one request with n=p
for p equal candidates (a server that ignores n gets p requests); speculative extension = extra requests for the
next step of candidates that finished theirs, in flight with the others; lazy verification = PRM requests batched
into one round of concurrent HTTP requests; early pruning = a pruned candidate gets no further requests, but its
current step cannot be cut short: the engine waits for each step's completion, so nothing is in flight to cancel
between steps (an error, a deadline or Ctrl-C does cancel every request in flight); the value-head PRM (--prm-format
head) cannot be served (a server returns 20 log-probabilities, not thousands of logits); KV budgets, eviction
and the memory profile do not apply to a served model (the server manages its own KV); --policy auto runs
baseline. A served PRM is read from the top-20 logprobs of the next token, and with logit_bias where its good or
bad token is not among them: the server must support both on /v1/completions."""


def add_model_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("models")
    g.add_argument(
        "--model",
        default=models.DEFAULT_MODEL,
        help=f"generator: a registry name ({', '.join(models.REGISTRY)}) or a .gguf path "
        f"(default {models.DEFAULT_MODEL})",
    )
    g.add_argument(
        "--prm",
        default=None,
        metavar="NAME|PATH|self",
        help="PRM weights: a registry name, a .gguf path, self = the generator's own, or hf:PATH = a "
        "Hugging Face folder (or a .gguf) on torch (default self; solve and chat: the generator's "
        f"recipe, {describe('prm')})",
    )
    g.add_argument(
        "--prm-format",
        default="auto",
        choices=PRM_FORMAT_CHOICES,
        help="how the PRM is read: head = a trained value head on its hidden states, judge = asks it "
        "Yes/No, rlhflow = +/- turns; auto = head where one is given or ships for the PRM model, "
        "else judge (default auto)",
    )
    g.add_argument(
        "--prm-head",
        default=None,
        metavar="FILE",
        help="value head (.safetensors with its .json) for --prm-format head; made by "
        "edgereason train-prm, or a shipped head's name: qwen2.5-coder-1.5b-lora, the 1.5B's "
        "fine-tuned verifier (+7.5 points in its beam search, an extra PRM pass a step) "
        "(default: the one that ships for the PRM model)",
    )
    g.add_argument(
        "--prm-device",
        default="auto",
        choices=["auto", "cpu", "cuda"],
        help="where an hf: PRM runs on torch (--prm hf:FOLDER|FILE.gguf, formats qwen-prm, skywork, "
        "math-shepherd, rlhflow, judge, head): auto = CUDA when torch sees one (default auto)",
    )
    g.add_argument("--threads", type=int, default=None, help="CPU threads (default: physical cores)")
    g.add_argument(
        "--gpu-layers",
        type=int,
        default=None,
        metavar="N",
        help="layers to offload to the GPU, 999 = all (default: all with a CUDA build of "
        "llama-cpp-python and a GPU present, else 0)",
    )
    g.add_argument(
        "--gpu-memory",
        default=None,
        metavar="SIZE",
        help="most GPU memory the engine may use, weights and KV together, e.g. 24GiB; without "
        "--kv-budget the KV caches get what the weights leave (default: no cap, the whole free "
        "memory; an error without layers on a GPU)",
    )
    g.add_argument(
        "--device-sampling",
        default="auto",
        choices=DEVICE_SAMPLING_MODES,
        help="cut each row to its top --device-top-k tokens on the device and sample over those on "
        "the host; auto = on where layers are on a GPU (default auto)",
    )
    g.add_argument(
        "--device-top-k",
        type=int,
        default=DEFAULT_TOP_K,
        metavar="K",
        help=f"candidates kept per row by device sampling (default {DEFAULT_TOP_K})",
    )
    g.add_argument(
        "--kv-tokens",
        type=int,
        default=DEFAULT_KV_TOKENS,
        help=f"KV cache tokens per model (default {DEFAULT_KV_TOKENS})",
    )
    g.add_argument(
        "--kv-budget",
        default=None,
        metavar="SIZE",
        help="KV memory of both models together, e.g. 24MiB or 1GiB (overrides --kv-tokens)",
    )
    g.add_argument(
        "--flash-attn",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="flash attention: much faster once many KV cells are in use; --no-flash-attn makes "
        "incremental PRM scoring bit-exact (default on)",
    )
    g.add_argument(
        "--split",
        default="profile",
        choices=SPLITS,
        help="how --kv-budget is split: by this device's memory profile, or evenly (default profile)",
    )
    add_remote_args(p)
    g.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="start-up notes (such as a missing memory profile) on every run, not once per device and model pair",
    )


def add_remote_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("remote serving (README: Serving)", REMOTE_HELP)
    g.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "llamacpp", "torch", "remote"],
        help="the runtime: torch (CUDA; on a CPU it runs, slowly, for tests), llamacpp, auto = torch "
        "where CUDA torch is installed and the models fit under --gpu-memory, else llamacpp; remote "
        "= the generator and the PRM on the server at --base-url (default auto)",
    )
    g.add_argument(
        "--base-url",
        default=None,
        metavar="URL",
        help="the OpenAI-compatible server of --backend remote, e.g. http://127.0.0.1:8080",
    )
    g.add_argument(
        "--prm-base-url",
        default=None,
        metavar="URL",
        help="the PRM's server: alone, the generator stays local and the PRM is served; with --backend "
        "remote, the PRM is on this server instead of --base-url",
    )
    g.add_argument(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help="environment variable holding the servers' API key (sent as a Bearer token)",
    )
    g.add_argument(
        "--served-model",
        default=None,
        metavar="NAME",
        help="the generator's model name on the server (default: the first it lists)",
    )
    g.add_argument(
        "--prm-served-model",
        default=None,
        metavar="NAME",
        help="the PRM's model name on its server (default: the first it lists)",
    )
    g.add_argument(
        "--remote-timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="seconds one HTTP request may take (default 120)",
    )
    g.add_argument(
        "--remote-retries",
        type=int,
        default=3,
        metavar="N",
        help="retries, with backoff, after a connection error or a 5xx answer (default 3)",
    )
    g.add_argument(
        "--remote-concurrency",
        type=int,
        default=16,
        metavar="N",
        help="HTTP requests in flight per server (default 16)",
    )
    g.add_argument(
        "--remote-step-tokens",
        type=int,
        default=DEFAULT_STEP_TOKENS,
        metavar="N",
        help=f"max_tokens of one generator request; a longer step takes more (default {DEFAULT_STEP_TOKENS})",
    )
    g.add_argument(
        "--remote-context",
        type=int,
        default=None,
        metavar="N",
        help="tokens of context per sequence on the generator's server (default: the model's trained "
        "context); a path ends at it, as at a KV limit",
    )


def remote_settings(args: argparse.Namespace) -> RemoteSettings | None:
    """None when both models run here."""
    remote = args.backend == "remote"
    if not remote and args.base_url:
        raise ConfigError(
            "--base-url is the server of --backend remote; add --backend remote (or use "
            "--prm-base-url for a served PRM alone)"
        )
    if remote and not args.base_url:
        raise ConfigError("--backend remote needs --base-url URL, the OpenAI-compatible server")
    if not remote and not args.prm_base_url:
        return None
    if args.prm_base_url:  # Endpoint would name --base-url, which the user may not have given
        check_url(args.prm_base_url, "--prm-base-url")

    def endpoint(url: str, model: str | None) -> Endpoint:
        return Endpoint(
            url,
            model,
            args.api_key_env,
            timeout_s=args.remote_timeout,
            retries=args.remote_retries,
            concurrency=args.remote_concurrency,
        )

    generator = endpoint(args.base_url, args.served_model) if remote else None
    prm_url = args.prm_base_url or args.base_url
    prm = endpoint(prm_url, args.prm_served_model or (args.served_model if prm_url == args.base_url else None))
    return RemoteSettings(generator, prm, step_tokens=args.remote_step_tokens, context_tokens=args.remote_context)


def add_search_args(
    p: argparse.ArgumentParser,
    from_recipe: bool = False,
    strategy: str = "beam",
    strategy_help: str = "search strategy",
    beams: bool = True,
) -> None:
    """from_recipe: --strategy, --vote, --beams and --temperature default to the generator's recipe, and --width and
    --select are left unset so that a note can say when the search has no use for them (apply_recipe fills them
    all); else `strategy`, a majority vote, 4 beams, T 0.8. beams=False: the command adds its own flag for
    `args.beams`."""

    def default(field: str, value: object) -> str:
        return f"the recipe: {describe(field)}" if from_recipe else str(value)

    g = p.add_argument_group("search")
    g.add_argument(
        "--strategy",
        default=None if from_recipe else strategy,
        choices=STRATEGY_NAMES,
        help=f"{strategy_help} (default {default('strategy', strategy)}; README: The verifier)",
    )
    if beams:
        g.add_argument(
            "--beams",
            type=beam_count,
            default=None if from_recipe else 4,
            metavar="N",
            help=f"candidates N: the beam size, or the samples of best-of-n (default {default('beams', 4)})",
        )
    g.add_argument(
        "--width",
        type=int,
        default=None if from_recipe else TREE_FLAGS["width"],
        help=f"beam width M: children per kept candidate, for beam and dvts (default {TREE_FLAGS['width']})",
    )
    g.add_argument("--max-steps", type=int, default=40, help="reasoning steps per path (default %(default)s)")
    g.add_argument("--max-step-tokens", type=int, default=2048, help="tokens per step (default %(default)s)")
    g.add_argument("--max-tokens", type=int, default=4096, help="generated tokens per path (default %(default)s)")
    g.add_argument(
        "--temperature",
        type=float,
        default=None if from_recipe else 0.8,
        help=f"sampling temperature, 0 = greedy (default {default('temperature', 0.8)})",
    )
    g.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling (default 1.0)")
    g.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    g.add_argument("--agg", default="last", choices=AGGREGATIONS, help="step-score aggregation (default last)")
    g.add_argument(
        "--select",
        default=None if from_recipe else TREE_FLAGS["select"],
        choices=SELECTS,
        help="which candidates a beam step keeps: the best-scored (top), or each kept parent's best "
        f"first, then the rest, a step repeated last (diverse: lineages kept apart; default "
        f"{TREE_FLAGS['select']})",
    )
    g.add_argument(
        "--vote",
        default=None if from_recipe else "majority",
        choices=VOTES,
        help="final answer: the best-scored path, the answer with the largest sum of path scores "
        "(weighted), or the one most paths reach, ties to the better-scored (default "
        f"{default('vote', 'majority')})",
    )


def beam_count(text: str) -> int:
    """One beam size: `bench --beams` takes a comma list, a single search takes one number and says so."""
    if "," in text:
        raise argparse.ArgumentTypeError(
            f"one search takes one beam size, got {text!r}; a list of sizes is for `edgereason bench --beams`"
        )
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes a whole number, got {text!r}") from None


def add_policy_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--policy",
        default="auto",
        help=f"engine policy PRESET[:key=value...]; presets: {', '.join(PRESETS)}; auto = edge where "
        f"a forward pass of 8 rows costs under {EDGE_MAX_COST_8}x one row on this device (a GPU), "
        "else baseline "
        "(default auto)",
    )
    add_switch_args(p)


def add_switch_args(p: argparse.ArgumentParser) -> None:
    """One flag per technique switch; a given flag overrides the preset's value."""
    g = p.add_argument_group("policy switches (override the preset)")
    for f in fields(Policy):
        if f.name == "name":
            continue
        flag, dest, help_text = "--" + f.name.replace("_", "-"), f"switch_{f.name}", SWITCH_HELP[f.name]
        if "bool" in str(f.type):
            g.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        elif f.name == "order":
            g.add_argument(flag, dest=dest, choices=["prefix", "fifo"], default=None, help=help_text)
        else:
            kind = float if "float" in str(f.type) else int
            g.add_argument(flag, dest=dest, type=kind, default=None, metavar=SWITCH_METAVAR[f.name], help=help_text)


def policy_from(args: argparse.Namespace, spec: str | None = None) -> Policy:
    changes = {k[len("switch_") :]: v for k, v in vars(args).items() if k.startswith("switch_") and v is not None}
    return with_switches(parse_policy(spec if spec is not None else args.policy), changes)


def model_settings(args: argparse.Namespace) -> ModelSettings:
    budget = parse_size(args.kv_budget) if args.kv_budget is not None else None  # "" is a mistake, not unset
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


def search_config(args: argparse.Namespace) -> SearchConfig:
    return SearchConfig(
        strategy=args.strategy,
        beams=args.beams,
        width=args.width,
        max_steps=args.max_steps,
        max_step_tokens=args.max_step_tokens,
        max_path_tokens=args.max_tokens,
        aggregation=args.agg,
        vote=args.vote,
        select=args.select,
        sampling=SamplingParams(temperature=args.temperature, top_p=args.top_p, seed=args.seed),
    )
