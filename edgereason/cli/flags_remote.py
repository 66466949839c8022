"""The remote-serving flags (--backend, --base-url...) and their conversion into RemoteSettings."""

from __future__ import annotations

import argparse
from dataclasses import replace

from edgereason.backends import (
    DEFAULT_MAX_ANSWER_MIB,
    DEFAULT_STEP_TOKENS,
    Endpoint,
    RemoteSettings,
    check_url,
)
from edgereason.errors import ConfigError

REMOTE_HELP = """\
The generator and/or the PRM on an OpenAI-compatible server (llama-server, vLLM, SGLang); --model
and --prm then name the served models' GGUFs, read here for their tokenizer and chat template only.
What each technique becomes on a server, and what a served PRM needs: docs/cli.md#serving."""


def add_remote_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("remote serving (README: Serving)", REMOTE_HELP)
    _add_server_flags(g)
    _add_request_flags(g)


def _add_server_flags(g: argparse._ArgumentGroup) -> None:
    """Which runtime, and where the served models are."""
    g.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "llamacpp", "torch", "remote"],
        help="the runtime: torch (CUDA; on a CPU it runs, slowly, for tests), llamacpp, auto = "
        "llamacpp where its build runs on the GPU (faster today), else torch where CUDA torch is "
        "installed and the models fit under --gpu-memory, else llamacpp; remote = the generator "
        "and the PRM on the server at --base-url (default auto)",
    )
    g.add_argument(
        "--base-url",
        default=None,
        metavar="URL[,URL...]",
        help="the OpenAI-compatible server of --backend remote, e.g. http://127.0.0.1:8080, or a "
        "comma list of servers of one model: requests spread over them (least in flight, a path "
        "kept on the server that holds its prefix), and one that stops answering hands its "
        "requests to the others",
    )
    g.add_argument(
        "--prm-base-url",
        default=None,
        metavar="URL[,URL...]",
        help="the PRM's server, or a comma list of them: alone, the generator stays local and the "
        "PRM is served; with --backend remote, the PRM is on these servers instead of --base-url",
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


def _add_request_flags(g: argparse._ArgumentGroup) -> None:
    """How the HTTP requests to the servers are made."""
    g.add_argument(
        "--remote-timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="seconds one HTTP request may take, from sending it to its answer's last byte "
        "(default 120)",
    )
    g.add_argument(
        "--remote-max-answer",
        type=float,
        default=DEFAULT_MAX_ANSWER_MIB,
        metavar="MIB",
        help="MiB one answer of a server may hold, decompressed (default "
        f"{DEFAULT_MAX_ANSWER_MIB:g}); a larger one ends the search with one line",
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
        help="max_tokens of one generator request; a longer step takes more (default "
        f"{DEFAULT_STEP_TOKENS})",
    )
    g.add_argument(
        "--remote-context",
        type=int,
        default=None,
        metavar="N",
        help="tokens of context per sequence on the generator's server (default: the model's "
        "trained context); a path ends at it, as at a KV limit",
    )


def remote_settings(args: argparse.Namespace, remote: bool) -> RemoteSettings | None:
    """None when both models run here. remote: --backend remote."""
    if not remote and args.base_url:
        raise ConfigError(
            "--base-url is the server of --backend remote; add --backend remote (or use "
            "--prm-base-url for a served PRM alone)"
        )
    if remote and not args.base_url:
        raise ConfigError("--backend remote needs --base-url URL, the OpenAI-compatible server")
    if not remote and not args.prm_base_url:
        return None

    def endpoints(text: str, flag: str, model: str | None) -> tuple[Endpoint, ...]:
        return tuple(
            Endpoint(
                url,
                model,
                args.api_key_env,
                timeout_s=args.remote_timeout,
                retries=args.remote_retries,
                max_answer_mib=args.remote_max_answer,
                concurrency=args.remote_concurrency,
            )
            for url in url_list(text, flag)
        )

    generator = endpoints(args.base_url, "--base-url", args.served_model) if remote else ()
    # a value head runs here, beside the servers
    if remote and not args.prm_base_url and args.prm_format == "head":
        return RemoteSettings(
            generator, (), args.remote_step_tokens, args.remote_context, prm_here=True
        )
    # no --prm-base-url: the PRM is on the generator's servers, under --served-model's name unless
    # it has its own
    prm = (
        endpoints(
            args.prm_base_url,
            "--prm-base-url",
            args.prm_served_model
            or (args.served_model if args.prm_base_url == args.base_url else None),
        )
        if args.prm_base_url
        else tuple(replace(e, model=args.prm_served_model or e.model) for e in generator)
    )
    return RemoteSettings(
        generator, prm, step_tokens=args.remote_step_tokens, context_tokens=args.remote_context
    )


def url_list(text: str, flag: str) -> list[str]:
    """A comma list of server URLs, written as bench's list flags are, each checked (naming `flag`:
    Endpoint would name --base-url)."""
    urls = [url.strip() for url in text.split(",")]
    if not any(urls):
        raise ConfigError(f"{flag} needs at least one URL")
    if "" in urls:
        raise ConfigError(f"{flag} has an empty value; separate its URLs by single commas")
    for url in urls:
        check_url(url, flag)
    return urls
