"""Bad input and misleading output of the CLI (issue 17), each reproduced first. Every error is one
line with exit code 2 (1 for a model file) and no traceback.

- bench --out: a file, a folder that cannot be made, earlier results, or a folder where results.json
  or results.csv goes are refused before any model loads; --force overwrites; a failed write leaves
  the earlier results.json / results.csv whole.
- bench --dataset: a line JSON cannot read (nested too deep, an integer of 5,000 digits) names its
  line, and so does an answer that is a list, an object or true/false (was graded against its Python
  text); a folder is called a folder (was "not found"), a file without read permission is one line
  (was a traceback); a problem the generator cannot hold is named before the first run (was refused
  mid-run, that run's work lost).
- bench --compare: missing results.json, not JSON, runs not objects, missing fields, wrong types,
  null, NaN: one line naming the file and the field (issue 62).
- solve --json: first steps have parent null, every node a depth and finish; a normal run gives its
  reason.
- solve: a problem longer than the model's trained context is refused at submit, and so are more
  beams than the generator's 256 sequences (was a failed search advising a larger KV budget).
- start-up: the "no memory profile" note comes once per device and model pair (always with
  --verbose), never before an error, and a damaged profile is called corrupt, with what is wrong
  (one without curves, or with bytes of the wrong type, crashed start-up: issue 62).
- a missing --prm file is named as the PRM file; a model file without read permission, and an
  $EDGEREASON_HOME that is a file (a pull cannot write there), are one line each; a memory-profile
  --plot file without write permission is refused before measuring (was found once the profile was
  measured).
- chat with stdin closed says it needs a terminal; stdout whose reader quit (`| head`) ends with
  141, no traceback.
- solve --show-tree: how each path ended (not "[complete]"); long steps cut at a word, with "...".
- policy-switch flags: a metavar and a help line each.
- one vocabulary: memory-profile --model/--kv-budget (old --generator/--budget still work); solve
  --beams refuses a list with a pointer to bench; bench --beams takes one number.
- --kv-budget too small: sizes in the unit given, and a minimum budget that does work; --kv-budget
  or --kv-tokens beyond the free memory: refused before llama.cpp allocates it (the kernel killed
  the process)."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from edgereason.cli.main import build_parser, main
from edgereason.cli.solve import clip, print_tree
from edgereason.engine.policy import SWITCH_HELP
from edgereason.engine.result import RequestMetrics, SearchResult
from edgereason.evaluation import report
from edgereason.memory import default_device_id
from edgereason.memory.profile_store import profile_path, verifier_id

FAST = ["--max-steps", "1", "--max-step-tokens", "8", "--beams", "2", "--width", "2"]


@pytest.fixture()
# smollm2_path first: it resolves under the real home
def home(tmp_path, monkeypatch, smollm2_path):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def one_line_error(capsys, rc: int, code: int = 2) -> str:
    """The single stderr line of a clean user error (settings: 2; a model file: 1)."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == code and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- bench --out -----------------------------------------------------------------------------------


@pytest.fixture()
def dataset(tmp_path) -> Path:
    path = tmp_path / "two.jsonl"
    path.write_text(
        '{"id": "a", "problem": "What is 2+3?", "answer": "5"}\n{"id": "b", "problem": "What is '
        '4*2?", "answer": "8"}\n'
    )
    return path


def bench(dataset: Path, out: Path, *extra: str) -> int:
    return main(
        [
            "bench",
            "--dataset",
            str(dataset),
            "--limit",
            "1",
            "--policies",
            "baseline",
            "--kv-tokens",
            "1024",
            "--out",
            str(out),
            *FAST,
            *extra,
        ]
    )


def test_bench_out_that_is_a_file_fails_before_the_models_load(tmp_path, dataset, capsys):
    out = tmp_path / "taken"
    out.write_text("not a folder")
    # a model error would mean: checked late
    rc = bench(dataset, out, "--model", str(tmp_path / "absent.gguf"))
    assert "is a file" in one_line_error(capsys, rc) and out.read_text() == "not a folder"


def test_bench_out_that_cannot_be_created(tmp_path, dataset, capsys):
    (tmp_path / "file").write_text("")
    rc = bench(dataset, tmp_path / "file" / "out", "--model", str(tmp_path / "absent.gguf"))
    assert "cannot write results to --out" in one_line_error(capsys, rc)


def test_bench_refuses_earlier_results_unless_forced(tmp_path, dataset, capsys, home, smollm2_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text('{"config": {}, "runs": ["earlier"]}')
    rc = bench(dataset, out, "--model", str(tmp_path / "absent.gguf"))
    assert "--force" in one_line_error(capsys, rc)
    assert json.loads((out / "results.json").read_text())["runs"] == ["earlier"]
    # --beams: one number is a list too
    assert bench(dataset, out, "--model", str(smollm2_path), "--force") == 0
    (run,) = json.loads((out / "results.json").read_text())["runs"]
    assert run["beams"] == 2 and run["problems"] == 1
    # no temp file left
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("name", ["results.json", "results.csv"])
def test_bench_out_with_a_folder_where_a_results_file_goes(tmp_path, dataset, capsys, name):
    """An IsADirectoryError traceback once the first run was done, even with --force."""
    out = tmp_path / "out"
    (out / name).mkdir(parents=True)
    rc = bench(dataset, out, "--model", str(tmp_path / "absent.gguf"), "--force")
    assert f"--out {out} holds a folder named {name} where the results go" in one_line_error(
        capsys, rc
    )
    assert [p.name for p in out.iterdir()] == [name]


@pytest.mark.parametrize("fail_in", ["csv_rows", "fsync"])
def test_a_failed_results_write_keeps_the_earlier_files(tmp_path, monkeypatch, fail_in):
    report.write_results(tmp_path, {"n": 1}, [{"policy": "edge", "beams": 4}])
    before = {name: (tmp_path / name).read_text() for name in ("results.json", "results.csv")}

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    if fail_in == "csv_rows":
        monkeypatch.setattr(csv.DictWriter, "writerows", disk_full)
    else:
        monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError):
        report.write_results(tmp_path, {"n": 2}, [{"policy": "edge", "beams": 8}])
    assert {name: (tmp_path / name).read_text() for name in before} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv", "results.json"]


@pytest.mark.parametrize(
    "line", ["[" * 100_000 + "]" * 100_000, '{"problem": "q", "answer": ' + "9" * 5000 + "}"]
)
def test_a_dataset_line_json_cannot_read_names_its_line(tmp_path, dataset, capsys, line):
    """Nested too deep for the JSON parser, or an integer too long for Python: a traceback
    before."""
    with dataset.open("a") as f:
        f.write(line + "\n")
    rc = bench(dataset, tmp_path / "out", "--model", str(tmp_path / "absent.gguf"))
    assert f"{dataset}:3: not a JSON object that can be read" in one_line_error(capsys, rc)


@pytest.mark.parametrize("answer", ['["4", "5"]', '{"x": 1}', "true"])
def test_a_dataset_answer_that_is_not_a_string_or_number_names_its_line(
    tmp_path, dataset, capsys, answer
):
    """bench ran and stored the gold as "['4', '5']", "{'x': 1}" or "True" before (exit 0): no model
    writes those."""
    with dataset.open("a") as f:
        f.write('{"id": "c", "problem": "What is 1+3?", "answer": ' + answer + "}\n")
    rc = bench(dataset, tmp_path / "out", "--model", str(tmp_path / "absent.gguf"))
    assert f"{dataset}:3: 'answer' is " in one_line_error(capsys, rc)


def test_a_dataset_that_is_a_folder_is_called_one(tmp_path, capsys):
    # "not found" before
    rc = bench(tmp_path, tmp_path / "out", "--model", str(tmp_path / "absent.gguf"))
    assert f"dataset {tmp_path} is a folder; give a JSONL file" in one_line_error(capsys, rc)


def test_a_dataset_without_read_permission_is_named(tmp_path, dataset):
    dataset.chmod(0)
    proc = subprocess.run(
        without_root_file_access(
            "bench",
            "--dataset",
            str(dataset),
            "--model",
            "absent.gguf",
            "--out",
            str(tmp_path / "out"),
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = proc.stderr.splitlines()
    # a PermissionError traceback before
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert (
        lines[0]
        == f"edgereason: error: cannot read dataset {dataset}: Permission denied; check its "
        "permissions"
    )


def test_a_problem_the_generator_cannot_hold_is_named_before_the_first_run(
    tmp_path, dataset, capsys, home, smollm2_path
):
    """Refused at its submit before: mid-run, without its id, and the problems that run had finished
    were lost."""
    with dataset.open("a") as f:
        f.write(json.dumps({"id": "long", "problem": "What is 2+3? " * 300, "answer": "5"}) + "\n")
    rc = bench(
        dataset,
        tmp_path / "out",
        "--model",
        str(smollm2_path),
        "--limit",
        "3",
        "--concurrency",
        "1",
    )
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err, err
    assert err.splitlines()[-1].startswith(
        f"edgereason: error: {dataset}: problem 'long': the problem is "
    ), err
    assert "KV memory holds 1024" in err and "0/3" not in err  # before the first run's progress bar


# -- bench --compare -------------------------------------------------------------------------------

GOOD_RUN = {"policy": "edge", "beams": 4, "rate": "inf", **{f: 1.0 for f in report.COMPARED}}


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no results.json"),
        ("{half a file", "results.json: not whole JSON"),
        pytest.param(  # RecursionError, a traceback before
            '{"runs": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "results.json: nested too deep to read",
            id="nested too deep",
        ),
        ('["a list"]', "results.json: the top level must be an object, not a list of 1"),
        ("null", "results.json: the top level must be an object, not null"),
        ('{"runs": [1, 2]}', "results.json: runs[0] must be an object, not 1"),
        (
            json.dumps({"runs": [{k: v for k, v in GOOD_RUN.items() if k != "throughput_tok_s"}]}),
            "results.json: runs[0].throughput_tok_s is missing",
        ),
        (
            json.dumps({"runs": [GOOD_RUN, {**GOOD_RUN, "wall_s": "slow"}]}),
            'results.json: runs[1].wall_s must be a number, not "slow"',
        ),
        (
            json.dumps({"runs": [{**GOOD_RUN, "accuracy": float("nan")}]}),
            "results.json: runs[0].accuracy must be a number, not NaN",
        ),
        (
            json.dumps({"runs": [{**GOOD_RUN, "beams": None}]}),
            "results.json: runs[0].beams must be a whole number > 0, not null",
        ),
    ],
)
def test_compare_on_a_damaged_results_file(tmp_path, capsys, content, message):
    good, bad = tmp_path / "good", tmp_path / "bad"
    for folder in (good, bad):
        folder.mkdir()
    (good / "results.json").write_text(json.dumps({"config": {}, "runs": [GOOD_RUN]}))
    if content is not None:
        (bad / "results.json").write_text(content)
    line = one_line_error(capsys, main(["bench", "--compare", str(good), str(bad)]))
    assert message in line and "unexpected" not in line


# -- solve: JSON tree and reason, trained context, --show-tree -------------------------------------


def test_solve_json_tree_is_rooted_and_says_why_it_ended(smollm2_path, capsys):
    assert main(["solve", "What is 2+3?", "--model", str(smollm2_path), *FAST, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    nodes = out["tree"]["nodes"]
    ids = {n["id"] for n in nodes}
    assert nodes and all({"depth", "finish"} <= set(n) for n in nodes)
    assert all((n["parent"] is None) == (n["depth"] == 1) for n in nodes)
    assert all(n["parent"] is None or n["parent"] in ids for n in nodes)
    assert out["status"] == "done" and re.fullmatch(
        r"completed \d+ paths? \(.+\)", out["reason"]
    ), out["reason"]


def test_problem_longer_than_the_trained_context(smollm2_path, capsys):
    long = "How many apples are left? " * 2000  # about 12k tokens; SmolLM2 was trained on 8k
    rc = main(["solve", long, "--model", str(smollm2_path), "--kv-tokens", "512", *FAST])
    assert re.search(r"trained on at most \d+ tokens of context", one_line_error(capsys, rc))


@pytest.mark.parametrize("strategy", ["beam", "best-of-n"])
def test_more_beams_than_the_generator_runs_at_once(smollm2_path, capsys, strategy):
    """512 beams failed after loading, as "cannot make progress with the KV memory it has; raise
    --kv-budget": the limit is llama.cpp's 256 sequences, one a beam."""
    rc = main(
        [
            "solve",
            "What is 2+3?",
            "--model",
            str(smollm2_path),
            *FAST,
            "--strategy",
            strategy,
            "--beams",
            "512",
        ]
    )
    assert re.search(
        r"--beams 512 is more than .* 256 sequences, one a beam; pick --beams 256 or fewer",
        one_line_error(capsys, rc),
    )


@pytest.mark.parametrize(
    "command",
    [
        ["solve", "2+3?", "--strategy", "best-of-n", "--beams", "100000000"],
        ["bench", "--beams", "4,512"],
    ],
)
def test_beams_beyond_any_local_generator_are_refused_before_the_model_loads(
    tmp_path, capsys, gsm8k_path, command
):
    """--beams 100000000 was refused only after the model loaded (42 s for the 1.5B): here the model
    file is not even there, and the beams are what is refused."""
    more = (
        ["--dataset", str(gsm8k_path), "--out", str(tmp_path / "out")]
        if command[0] == "bench"
        else []
    )
    rc = main([*command, *more, "--model", str(tmp_path / "absent.gguf")])
    message = one_line_error(capsys, rc, code=2)
    assert "is more than a local generator runs at once: 256 sequences" in message
    assert not (tmp_path / "out").exists()


def test_the_early_beams_bound_is_the_local_backends_own() -> None:
    """The CLI checks --beams before a model loads against the sequences a local context runs at
    once."""
    from edgereason.backends.llamacpp.runtime import SEQ_SLOTS as LLAMACPP_SLOTS
    from edgereason.backends.torch import SEQ_SLOTS as TORCH_SLOTS
    from edgereason.cli.flags_search import LOCAL_MAX_BEAMS

    assert LOCAL_MAX_BEAMS == LLAMACPP_SLOTS == TORCH_SLOTS


@pytest.mark.slow
def test_a_model_whose_tensor_data_is_damaged_is_one_line(tmp_path, home, smollm2_path, capsys):
    """Its header intact, NaN in a layer's weights: `ValueError: attempt to get argmax of an empty
    sequence` (backends/host_sampling.py) before."""
    import gguf

    damaged = tmp_path / "damaged.gguf"
    shutil.copy(smollm2_path, damaged)
    norm = next(t for t in gguf.GGUFReader(damaged).tensors if t.name == "blk.0.attn_norm.weight")
    with damaged.open("r+b") as f:  # F32: 0xFFFFFFFF is NaN
        f.seek(norm.data_offset)
        f.write(b"\xff" * norm.n_bytes)
    rc = main(["solve", "What is 2+3?", "--model", str(damaged), "--prm", "self", *FAST])
    # a fresh home: the note that no memory profile exists comes first
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err and "unexpected" not in err, err
    assert err.splitlines()[-1].startswith("edgereason: error: the model's output is not a number")


def test_show_tree_says_how_each_path_ended(smollm2_path, capsys):
    assert main(["solve", "What is 2+3?", "--model", str(smollm2_path), *FAST, "--show-tree"]) == 0
    tree = capsys.readouterr().out.split("Surviving tree:")[1]
    assert "[complete]" not in tree and "[stopped at --max-steps]" in tree


def test_show_tree_cuts_long_steps_at_a_word():
    words = (
        "The farmer has twelve apples and gives away five of them to each neighbour on the street"
    )
    assert clip(words, 40) == "The farmer has twelve apples and..."
    assert clip("x" * 50, 20) == "x" * 17 + "..."  # one long word: cut inside it
    assert clip(" short \n step ", 20) == "short step"


def test_show_tree_line(capsys):
    row = {
        "id": 1,
        "parent": None,
        "depth": 1,
        "text": "Add 2 and 3.",
        "score": 0.5,
        "status": "complete",
        "finish": "answer",
        "potential": 1,
    }
    print_tree(SearchResult("r", "q", None, [], [row], RequestMetrics()))
    assert capsys.readouterr().out == "  - (0.500) [boxed answer] Add 2 and 3.\n"


# -- start-up notes and model errors ---------------------------------------------------------------


def solve_stderr(capsys, smollm2_path, *extra: str) -> str:
    assert main(["solve", "What is 2+3?", "--model", str(smollm2_path), *FAST, *extra]) == 0
    return capsys.readouterr().err


def test_profile_note_once_per_pair_or_with_verbose(home, smollm2_path, capsys):
    # a search refused at its start says its error alone, and the note is still owed
    long = "How many apples are left? " * 2000
    rc = main(["solve", long, "--model", str(smollm2_path), "--kv-tokens", "512", *FAST])
    assert "trained on at most" in one_line_error(capsys, rc)
    assert "no memory profile" in solve_stderr(capsys, smollm2_path)
    assert "no memory profile" not in solve_stderr(capsys, smollm2_path)
    assert "no memory profile" in solve_stderr(capsys, smollm2_path, "--verbose")


REFERENCE_PROFILE = (
    Path(__file__).parents[2]
    / "profiles"
    / ("cpu-amd-epyc-2c__smollm2-135m__smollm2-135m-judge.json")
)


def _profile_without(*keys: str) -> str:
    profile = json.loads(REFERENCE_PROFILE.read_text())
    for key in keys:
        profile.pop(key)
    return json.dumps({**profile, "generator_kv_bytes": "12MiB"} if not keys else profile)


@pytest.mark.parametrize(
    "content, why",
    [
        ('{"generator_kv_bytes": 1', "not whole JSON"),
        # `--policy auto` read its pass cost from the curves: a KeyError
        (_profile_without("curves"), "curves is missing"),
        # the --kv-budget split by the profile's bytes: a TypeError
        (_profile_without(), 'generator_kv_bytes must be a whole number > 0, not "12MiB"'),
    ],
    ids=["cut short", "no curves", "wrong type"],
)
def test_damaged_profile_is_called_corrupt_and_why(home, smollm2_path, capsys, content, why):
    path = profile_path(
        default_device_id("cpu"), smollm2_path.stem, verifier_id(str(smollm2_path), "judge")
    )
    path.parent.mkdir(parents=True)
    path.write_text(content)
    err = solve_stderr(capsys, smollm2_path, "--prm-format", "judge", "--kv-budget", "64MiB")
    assert f"memory profile {path} is corrupt (" in err and why in err
    assert "no memory profile" not in err and "unexpected" not in err


def test_missing_prm_file_is_named(tmp_path, smollm2_path, capsys):
    rc = main(
        ["solve", "What is 2+3?", "--model", str(smollm2_path), "--prm", str(tmp_path / "prm.gguf")]
    )
    assert "PRM file not found" in one_line_error(capsys, rc, code=1)


def without_root_file_access(*args: str) -> list[str]:
    """`python -m edgereason ARGS` in a process that file permissions hold for: as root, without the
    capabilities that bypass them."""
    command = [sys.executable, "-m", "edgereason", *args]
    if os.geteuid() != 0:
        return command
    if not shutil.which("setpriv"):
        pytest.skip("root bypasses file permissions, and setpriv is not here to drop that")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *command]


def test_a_model_file_without_read_permission_is_named(tmp_path):
    locked = tmp_path / "locked.gguf"
    locked.write_bytes(b"GGUF" + b"\0" * 64)
    locked.chmod(0)
    proc = subprocess.run(
        without_root_file_access("solve", "What is 2+3?", "--model", str(locked), "--prm", "self"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = proc.stderr.splitlines()
    # a PermissionError traceback before
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert (
        lines[0]
        == f"edgereason: error: cannot read model file {locked}: Permission denied; check its "
        "permissions"
    )


def test_a_plot_file_without_write_permission_is_refused_before_measuring(
    tmp_path, home, smollm2_path
):
    """The folder could be written in, so the file was found unwritable only once the profile was
    measured."""
    plot = tmp_path / "curves.png"
    plot.write_bytes(b"an earlier plot")
    plot.chmod(0o444)
    proc = subprocess.run(
        without_root_file_access(
            "memory-profile", "--model", str(smollm2_path), "--plot", str(plot)
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = proc.stderr.splitlines()
    # no "generator decode: ..." progress before it
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0] == (
        f"edgereason: error: --plot {plot}: the file is there and cannot be written; check its "
        "permissions or give another file name"
    )
    assert plot.read_bytes() == b"an earlier plot"


def test_a_home_that_is_a_file_is_named_before_a_pull(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    home.write_text("a file where the cache should be")
    monkeypatch.setenv("EDGEREASON_HOME", str(home))
    # a traceback before
    rc = main(["solve", "What is 2+3?", "--model", "smollm2-135m", "--prm", "self"])
    assert f"cannot write the model cache {home / 'models'}" in one_line_error(capsys, rc)
    assert home.read_text() == "a file where the cache should be"


# -- flags -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["solve", "chat", "bench"])
def test_policy_switches_have_metavars_and_help(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help-all"])
    text = " ".join(capsys.readouterr().out.split())  # undo argparse's line wrapping
    assert "SWITCH_" not in text
    for name, help_text in SWITCH_HELP.items():
        assert help_text in text, name
    assert "--spec-reuse-fraction FRACTION" in text and "--lv-threshold TOKENS" in text


def test_memory_profile_takes_the_shared_names_and_the_old_ones():
    parser = build_parser()
    new = parser.parse_args(["memory-profile", "--model", "m.gguf", "--kv-budget", "1GiB"])
    old = parser.parse_args(["memory-profile", "--generator", "m.gguf", "--budget", "1GiB"])
    assert (new.model, new.kv_budget) == (old.model, old.kv_budget) == ("m.gguf", "1GiB")


@pytest.mark.parametrize("command", [["solve", "1+1"], ["chat"], ["memory-profile"]])
def test_a_list_of_beams_outside_bench_says_where_lists_go(command, capsys):
    with pytest.raises(SystemExit) as stop:
        main([*command, "--beams", "4,8"])
    err = capsys.readouterr().err
    assert (
        stop.value.code == 2
        and "one beam size" in err
        and "bench --beams" in err
        and "Traceback" not in err
    )


def test_kv_budget_too_small_speaks_the_users_unit_and_the_minimum(home, smollm2_path, capsys):
    rc = main(["solve", "What is 2+3?", "--model", str(smollm2_path), *FAST, "--kv-budget", "1KiB"])
    line = one_line_error(capsys, rc)  # one line: no profile note before the error
    assert "--kv-budget 1KiB leaves 0 generator and 0 PRM KV tokens" in line, line
    minimum = re.search(r"use --kv-budget (\d+(?:\.\d)?KiB) or more", line).group(1)
    assert (
        main(["solve", "What is 2+3?", "--model", str(smollm2_path), *FAST, "--kv-budget", minimum])
        == 0
    )


@pytest.mark.parametrize("flag, size", [("--kv-budget", "1000TiB"), ("--kv-tokens", str(10**12))])
def test_kv_memory_beyond_the_free_memory_is_refused_before_llama_cpp_makes_it(
    home, smollm2_path, capsys, flag, size
):
    """llama.cpp allocates and clears a CPU KV cache whole: --kv-tokens 99999999999 was killed by
    the kernel's OOM killer (exit 137, no message); a budget too large even for that was "could not
    create a context" (exit 1)."""
    rc = main(["solve", "What is 2+3?", "--model", str(smollm2_path), *FAST, flag, size])
    line = one_line_error(capsys, rc)
    assert re.fullmatch(
        rf"edgereason: error: {flag} {size} needs [\d.]+ GiB of KV memory for the two models, more "
        rf"than the [\d.]+ [GMK]iB free on this machine; lower {flag}",
        line,
    ), line


@pytest.mark.parametrize("stdin", ["pytest's", "closed"])
def test_chat_without_a_terminal_says_to_use_solve(capsys, monkeypatch, stdin):
    """Under pytest stdin and stdout are no terminal, as from a script or a pipe: the UI would wait
    for keys forever. Started with stdin closed (`<&-`), sys.stdin is None: an AttributeError
    traceback before."""
    if stdin == "closed":
        monkeypatch.setattr(sys, "stdin", None)
    assert main(["chat", "--model", "smollm2-135m", "--prm", "self"]) == 2
    assert "chat needs an interactive terminal" in one_line_error(capsys, 2)


def test_stdout_closed_by_its_reader_ends_quietly():
    """`edgereason ... | head` where head has quit: a BrokenPipeError traceback before; now the
    shell's 141."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "edgereason", "models", "list", "--json"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert proc.returncode == 141 and proc.stderr == "", proc.stderr


def test_json_mode_reports_a_failure_as_one_json_object(capsys):
    assert main(["solve", "   ", "--json", "--model", "smollm2-135m", "--prm", "self"]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {
        "error": "the problem is empty; pass the problem text (or - to read it from stdin)",
        "exit_code": 2,
    }
    assert "edgereason: error: the problem is empty" in captured.err


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["solve", "1+1", "--json", "--width", "abc"],
            "argument --width: invalid int value: 'abc'",
        ),
        (
            ["solve", "1+1", "--json", "--beams", "4,8"],
            "argument --beams: one search takes one beam size",
        ),
        (["solve", "1+1", "--json", "--bogus"], "unrecognized arguments: --bogus"),
        (
            ["memory-profile", "--json", "--device", "tpu"],
            "argument --device: invalid choice: 'tpu'",
        ),
    ],
)
def test_json_mode_reports_a_bad_command_line_as_one_json_object(capsys, argv, message):
    """argparse's refusals printed nothing on stdout, though --json promises an error object on a
    failure."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert stop.value.code == report["exit_code"] == 2 and report["error"].startswith(message), (
        report
    )
    # argparse's own lines, as before
    assert f"error: {message}" in captured.err and "usage:" in captured.err
