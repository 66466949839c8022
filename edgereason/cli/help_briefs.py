"""What each command's --help shows first (cli/help.py draws it): its groups of flags, a compact
usage line, and the help of flags whose full help runs long, cut to a line or two. %(default)s is a
flag's default."""

from __future__ import annotations

from typing import NamedTuple

# (a group's title, its flags: option strings or positional names)
Groups = list[tuple[str, list[str]]]


class Brief(NamedTuple):
    usage: str
    groups: Groups
    short: dict[str, str]


# the flags solve, chat and bench share
SHARED = {
    "--model": "generator: a registry name (edgereason models list) or a .gguf path "
    "(default %(default)s; README: Models)",
    "--prm": "PRM weights: a registry name, a .gguf path, or self = the generator's",
    "--gpu-memory": "most GPU memory to use, weights and KV, e.g. 24GiB",
    "--strategy": "search strategy (default: the generator's recipe)",
    "--beams": "candidates N: the beam size, or the samples of best-of-n (default: the recipe)",
    "--temperature": "sampling temperature, 0 = greedy (default: the recipe)",
    "--policy": "engine preset: baseline, edge, fasttts, specscale, naive-spec, auto "
    "(default auto: edge on a GPU, baseline on a CPU)",
}
DATASET = (
    "JSONL file, one {id, problem, answer} object a line; - reads stdin (edgereason data convert "
    "makes one from GSM8K or MATH)"
)
MODELS = ["--model", "--prm", "--threads", "--gpu-memory"]
SEARCH = ["--policy", "--strategy", "--beams", "--temperature", "--max-tokens", "--seed"]

BRIEFS = {
    "solve": Brief(
        "[options] PROBLEM",
        [
            ("arguments", ["problem"]),
            ("output", ["--json", "--show-tree", "--raw"]),
            ("models", MODELS),
            ("search", SEARCH),
        ],
        {**SHARED, "--json": "print one JSON object: answer, paths, tree, metrics"},
    ),
    "chat": Brief("[options]", [("models", MODELS), ("search", SEARCH)], SHARED),
    "bench": Brief(
        "--dataset FILE --out DIR [options]",
        [
            ("problems", ["--dataset", "--limit", "--offset"]),
            ("runs", ["--policies", "--beams", "--strategy", "--rate", "--concurrency"]),
            ("results", ["--out", "--force", "--no-plots", "--compare"]),
            ("models and search", ["--model", "--threads", "--max-tokens", "--seed"]),
        ],
        {
            **SHARED,
            "--dataset": DATASET,
            "--policies": "comma list of engine presets run side by side (default %(default)s)",
            "--beams": "beam size N, or a comma list of sizes run side by side (default 4)",
            "--strategy": "search strategy, or a comma list run side by side (default beam)",
            "--rate": "comma list of arrival rates in requests/s, inf = all at once (default inf)",
            "--concurrency": "most problems in flight at once, 0 = no limit (default 0)",
            "--out": "folder for results.json, results.csv and plots",
            "--compare": "print ratios NEW / BASE between two result folders",
        },
    ),
    "memory-profile": Brief(
        "[options]",
        [
            ("models", ["--model", "--prm", "--device", "--threads"]),
            ("the profile", ["--kv-budget", "--beams", "--requests", "--json", "--plot"]),
        ],
        {
            "--prm": "PRM weights (default self: the generator's own), as in solve",
            "--kv-budget": "KV memory of both models, e.g. 1GiB (default: what weights leave)",
            "--requests": "searches running at once (default %(default)s)",
        },
    ),
    "train-prm": Brief(
        "--dataset FILE [options]",
        [
            ("problems", ["--dataset", "--limit", "--offset"]),
            ("models", ["--model", "--backbone", "--prm"]),
            ("rollouts", ["--samples", "--mc-problems", "--concurrency"]),
            ("files", ["--work", "--out", "--phases"]),
            ("runtime", ["--threads", "--gpu-layers"]),
        ],
        {
            "--dataset": DATASET,
            "--prm": "the rollouts' PRM (default: the judge format on the generator's weights)",
            "--samples": "solutions per problem (default %(default)s)",
            "--mc-problems": "problems whose step prefixes get Monte-Carlo values (default 0)",
            "--phases": "comma list of rollouts, mc, features, train (default all)",
            "--threads": "CPU threads (default: the physical cores free at start)",
        },
    ),
}
