"""The search `solve` and `chat` run when the user names none: the generator's recipe, taken whole or not at all."""

from __future__ import annotations

import pytest

from edgereason.cli.common import apply_recipe, recipe_search_config
from edgereason.cli.main import build_parser
from edgereason.errors import ConfigError, ModelError
from edgereason.recipes import PLAIN, RECIPES, Recipe, recipe_for

Q05 = "qwen2.5-coder-0.5b"


def parsed(*argv: str):
    args = build_parser().parse_args(list(argv))
    recipe = apply_recipe(args).recipe if argv[0] in ("solve", "chat") else None
    return args, recipe


@pytest.mark.parametrize("command", [["solve", "1+1"], ["chat"]])
def test_the_default_generator_runs_its_measured_recipe(command):
    args, recipe = parsed(*command)
    assert recipe == RECIPES[Q05] and args.model == Q05
    assert (args.strategy, args.vote, args.prm) == ("beam", "weighted", "qwen2.5-coder-1.5b")
    assert (args.beams, args.width) == (8, 4)


@pytest.mark.parametrize("flags", [["--prm", "self"], ["--prm-format", "judge"], ["--prm-head", "my.safetensors"],
                                   ["--backend", "remote", "--base-url", "http://127.0.0.1:1"]])
def test_a_chosen_verifier_takes_the_plain_recipe(flags):
    args, recipe = parsed("solve", "1+1", *flags)
    assert recipe == PLAIN and (args.strategy, args.vote) == ("best-of-n", "majority")
    assert args.prm == (flags[1] if flags[0] == "--prm" else None)


def test_explicit_search_flags_win_and_other_generators_run_plain():
    args, _ = parsed("solve", "1+1", "--strategy", "dvts", "--vote", "best")
    assert (args.strategy, args.vote, args.prm) == ("dvts", "best", "qwen2.5-coder-1.5b")
    args, recipe = parsed("solve", "1+1", "--model", "smollm2-135m")
    assert recipe == PLAIN and (args.strategy, args.vote, args.prm) == ("best-of-n", "majority", None)
    assert recipe_for("./qwen.gguf", prm_chosen=False) == PLAIN  # a path has no measured recipe


def test_bench_and_training_keep_their_own_defaults():
    args, _ = parsed("bench", "--dataset", "d.jsonl")
    assert (args.strategy, args.vote, args.prm) == ("beam", "majority", None)
    args, _ = parsed("train-prm")
    assert (args.strategy, args.vote) == ("beam", "majority")


def test_help_names_the_recipe(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["solve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the generator's recipe: beam for qwen2.5-coder-0.5b, else best-of-n" in text


def test_a_recipe_with_an_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="unknown strategy"):
        Recipe(prm=None, strategy="sideways", vote="majority")


def test_the_recipes_prm_is_pulled_after_the_flags_are_checked():
    pulled = []
    args = build_parser().parse_args(["solve", "1+1"])
    config = recipe_search_config(args, resolve=lambda name, **_: pulled.append(name))
    assert pulled == ["qwen2.5-coder-1.5b"] and (config.strategy, config.vote, config.beams) == ("beam", "weighted", 8)
    args = build_parser().parse_args(["solve", "1+1", "--beams", "1"])
    with pytest.raises(ConfigError, match=r"--beams 1 is not divisible by --width 4.*--strategy best-of-n"):
        recipe_search_config(args, resolve=lambda name, **_: pulled.append(name))
    assert pulled == ["qwen2.5-coder-1.5b"]  # a typo costs no download


def test_offline_without_the_recipes_prm_the_plain_recipe_runs_with_a_note(capsys):
    def offline(name, **_):
        raise ModelError(f"could not download model {name} (1.1 GB): offline? run:\n  edgereason models pull {name}")

    args = build_parser().parse_args(["solve", "1+1", "--vote", "best"])
    config = recipe_search_config(args, resolve=offline)
    assert (config.strategy, config.vote, args.prm) == ("best-of-n", "best", None)  # the user's --vote stays
    err = capsys.readouterr().err
    assert "could not download model qwen2.5-coder-1.5b" in err
    assert "\n  edgereason models pull qwen2.5-coder-1.5b" in err
    assert "running best-of-n with the generator's own weights as PRM instead" in err
    assert "Traceback" not in err


def test_no_pull_where_the_user_chose_the_verifier():
    args = build_parser().parse_args(["solve", "1+1", "--prm", "self"])
    config = recipe_search_config(args, resolve=lambda *a, **k: pytest.fail("pulled a PRM the user did not ask for"))
    assert config.strategy == "best-of-n"
