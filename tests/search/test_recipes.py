"""The search `solve` and `chat` run when the user names none: the generator's recipe for the
device, taken whole or not at all."""

from __future__ import annotations

import pytest

from edgereason import models
from edgereason.cli.common import model_settings
from edgereason.cli.main import build_parser
from edgereason.cli.recipe_use import recipe_search_config
from edgereason.errors import ConfigError, ModelError
from edgereason.search.recipes import PLAIN, RECIPES, Recipe, SearchChoice, recipe_for
from edgereason.session import gpu

Q05, Q15 = "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"


def parsed(*argv: str, device: str = "cpu") -> SearchChoice:
    """solve's or chat's search, the recipe applied (its PRM taken as on disk); the flags are read,
    not changed."""
    args = build_parser().parse_args(list(argv))
    before = vars(args).copy()
    choice = recipe_search_config(args, model_settings(args), resolve=no_pull, device=device)
    assert vars(args) == before
    return choice


def searched(choice: SearchChoice) -> tuple:
    config = choice.config
    return config.strategy, config.vote, choice.prm, config.beams, config.sampling.temperature


def device_of(*argv: str) -> str:
    args = build_parser().parse_args(list(argv))
    return gpu.recipe_device(model_settings(args))


def test_the_default_generator_is_the_most_accurate_one():
    assert models.DEFAULT_MODEL == Q15


@pytest.mark.parametrize("command", [["solve", "1+1"], ["chat"]])
@pytest.mark.parametrize(
    "device, expected",
    [
        ("gpu", ("best-of-n", "weighted", None, 8, 0.6)),
        ("cpu", ("best-of-n", "weighted", None, 4, 0.4)),
    ],
)
def test_the_default_generator_runs_its_recipe_for_the_device(command, device, expected):
    choice = parsed(*command, device=device)
    assert build_parser().parse_args(command).model == Q15 and choice.recipe == RECIPES[Q15, device]
    assert searched(choice) == expected


@pytest.mark.parametrize("device", ["gpu", "cpu"])
def test_the_small_generator_is_judged_by_the_bigger_model(device):
    choice = parsed("solve", "1+1", "--model", Q05, device=device)
    assert choice.recipe == RECIPES[Q05, device]
    assert searched(choice) == ("beam", "weighted", Q15, 8, 0.6) and choice.config.width == 4


@pytest.mark.parametrize(
    "flags",
    [
        ["--prm", "self"],
        ["--prm-format", "judge"],
        ["--prm-head", "my.safetensors"],
        ["--backend", "remote", "--base-url", "http://127.0.0.1:1"],
    ],
)
def test_a_chosen_verifier_takes_the_plain_recipe(flags):
    choice = parsed("solve", "1+1", *flags)
    assert choice.recipe == PLAIN and searched(choice)[:2] == ("best-of-n", "majority")
    assert searched(choice)[3:] == (8, 0.8)
    assert choice.prm == (flags[1] if flags[0] == "--prm" else None)


def test_explicit_search_flags_win_and_other_generators_run_plain():
    given = ["--strategy", "dvts", "--vote", "best", "--beams", "16", "--temperature", "1"]
    assert searched(parsed("solve", "1+1", *given)) == ("dvts", "best", None, 16, 1.0)
    choice = parsed("solve", "1+1", "--model", Q05, "--strategy", "dvts")
    assert searched(choice) == ("dvts", "weighted", Q15, 8, 0.6)
    choice = parsed("solve", "1+1", "--model", "smollm2-135m")
    assert choice.recipe == PLAIN and searched(choice) == ("best-of-n", "majority", None, 8, 0.8)
    # a path has no measured recipe
    assert recipe_for("./qwen.gguf", "gpu", prm_chosen=False) == PLAIN


def test_the_device_is_where_the_session_puts_the_layers(monkeypatch):
    assert device_of("solve", "1+1", "--gpu-layers", "0") == "cpu"
    assert device_of("solve", "1+1", "--gpu-layers", "999") == "gpu"
    # unset: all layers where a CUDA build sees a GPU, none elsewhere (session/gpu.py decides, as
    # for the session)
    for layers, device in ((999, "gpu"), (0, "cpu")):
        monkeypatch.setattr(gpu, "default_gpu_layers", lambda backend, n=layers: n)
        assert device_of("solve", "1+1") == device


def test_bench_and_training_keep_their_own_defaults():
    args = build_parser().parse_args(["bench", "--dataset", "d.jsonl"])
    assert (args.strategy, args.vote, args.prm, args.temperature) == ("beam", "majority", None, 0.8)
    args = build_parser().parse_args(
        ["train-prm"]
    )  # its rollouts: 8 independent samples (--samples) unless --strategy beam
    assert (args.strategy, args.vote, args.beams, args.temperature) == (
        "best-of-n",
        "majority",
        8,
        0.8,
    )


def test_help_names_the_recipe(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["solve", "--help-all"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"the recipe: best-of-n for {Q15}, beam for {Q05}, else best-of-n" in text
    assert f"the recipe: 8 on a GPU and 4 on a CPU for {Q15}, 8 for {Q05}, else 8" in text


@pytest.mark.parametrize(
    "bad", [dict(strategy="sideways"), dict(beams=0), dict(temperature=float("nan"))]
)
def test_an_impossible_recipe_is_refused(bad):
    with pytest.raises(ValueError, match="recipe"):
        Recipe(**{"prm": None, "strategy": "beam", "vote": "majority", **bad})


def test_the_recipes_prm_is_pulled_after_the_flags_are_checked():
    pulled = []
    args = build_parser().parse_args(["solve", "1+1", "--model", Q05])
    config = recipe_search_config(
        args, model_settings(args), resolve=lambda name, **_: pulled.append(name), device="cpu"
    ).config
    assert pulled == [Q15] and (config.strategy, config.vote, config.beams) == (
        "beam",
        "weighted",
        8,
    )
    args = build_parser().parse_args(["solve", "1+1", "--model", Q05, "--beams", "1"])
    with pytest.raises(
        ConfigError, match=r"--beams 1 is not divisible by --width 4.*--strategy best-of-n"
    ):
        recipe_search_config(
            args, model_settings(args), resolve=lambda name, **_: pulled.append(name), device="cpu"
        )
    assert pulled == [Q15]  # a typo costs no download


def test_offline_without_the_recipes_prm_the_plain_recipe_runs_with_a_note(capsys):
    def offline(name, **_):
        raise ModelError(
            f"could not download model {name} (1.1 GB): offline? run:\n  edgereason models pull "
            f"{name}"
        )

    args = build_parser().parse_args(["solve", "1+1", "--model", Q05, "--vote", "best"])
    choice = recipe_search_config(args, model_settings(args), resolve=offline, device="gpu")
    config = choice.config
    # the user's --vote stays
    assert (config.strategy, config.vote, choice.prm) == ("best-of-n", "best", None)
    err = capsys.readouterr().err
    assert f"could not download model {Q15}" in err
    assert f"\n  edgereason models pull {Q15}" in err
    assert "running best-of-n with the generator's own weights as PRM instead" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("argv", [["solve", "1+1"], ["solve", "1+1", "--prm", "self"]])
def test_no_pull_where_the_recipe_needs_no_other_model(argv):
    args = build_parser().parse_args(argv)
    config = recipe_search_config(
        args,
        model_settings(args),
        resolve=lambda *a, **k: pytest.fail("pulled a PRM nobody asked for"),
        device="gpu",
    ).config
    assert config.strategy == "best-of-n"


def no_pull(name, **_):
    pass


@pytest.mark.parametrize(
    "argv, unused, tree",
    [
        (["--width", "2"], ("width",), (2, "top")),  # the default generator's recipe is best-of-n
        (["--width", "2", "--select", "diverse"], ("width", "select"), (2, "diverse")),
        (["--strategy", "best-of-n", "--select", "diverse"], ("select",), (4, "diverse")),
        (["--strategy", "beam", "--width", "2"], (), (2, "top")),
        (["--model", Q05, "--width", "2"], (), (2, "top")),  # its recipe is beam search
        ([], (), (4, "top")),
    ],
)
def test_tree_flags_that_best_of_n_does_not_read_are_named(argv, unused, tree):
    args = build_parser().parse_args(["solve", "1+1", *argv])
    choice = recipe_search_config(args, model_settings(args), resolve=no_pull, device="gpu")
    assert choice.unused == unused and (choice.config.width, choice.config.select) == tree
    note = choice.note()
    assert (note is None) == (not unused)
    if note:
        assert all(f"--{f}" in note for f in unused) and "--strategy beam" in note


def test_offline_the_plain_recipe_names_the_width_it_no_longer_reads():
    def offline(name, **_):
        raise ModelError(f"could not download model {name}")

    args = build_parser().parse_args(["solve", "1+1", "--model", Q05, "--width", "2"])
    choice = recipe_search_config(args, model_settings(args), resolve=offline, device="gpu")
    assert choice.config.strategy == "best-of-n" and choice.unused == ("width",)
