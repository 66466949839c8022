"""`edgereason train-prm` on a tiny real run: SmolLM2 through the engine and llama.cpp, torch
training, a head file.

SmolLM2 cannot do math and never writes `\\boxed{}`, so math-verify grades every path wrong. To give
training two classes, the test relabels the real rollouts by whether the gold number appears in the
path's text; features, training and the head are then the real pipeline's."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from edgereason.cli.main import build_parser, main
from edgereason.heads.value_head import load_head
from edgereason.training import features as feats
from edgereason.training.rollouts import merge_rollouts
from edgereason.util.jsonl import read_jsonl

pytest.importorskip("torch")

PROBLEMS = [
    ("c0", "Copy this sentence exactly: Therefore, the final answer is: $\\boxed{4}$.", "4"),
    ("c1", "Copy this sentence exactly: Therefore, the final answer is: $\\boxed{7}$.", "7"),
    ("c2", "What is 2 + 7? Say only the number.", "9"),
]
TINY = [
    "--model",
    "smollm2-135m",
    "--samples",
    "4",
    "--max-steps",
    "3",
    "--max-step-tokens",
    "24",
    "--max-tokens",
    "72",
    "--concurrency",
    "3",
    "--threads",
    "2",
]


@pytest.fixture()
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "copy.jsonl"
    path.write_text(
        "".join(json.dumps({"id": i, "problem": p, "answer": a}) + "\n" for i, p, a in PROBLEMS)
    )
    return path


def test_rollouts_resume_then_features_and_training_make_a_head(
    smollm2_path, dataset, tmp_path, capsys
):
    work = tmp_path / "work"
    args = ["train-prm", *TINY, "--dataset", str(dataset), "--work", str(work)]
    assert main(args + ["--phases", "rollouts"]) == 0
    rows = list(read_jsonl(work / "rollouts.jsonl"))
    assert sorted(r["id"] for r in rows) == ["c0", "c1", "c2"]
    assert all(
        len(r["paths"]) >= 1
        and all(p["steps"] and len(p["prm"]) == len(p["steps"]) for p in r["paths"])
        for r in rows
    )
    assert main(args + ["--phases", "rollouts"]) == 0  # resumed: nothing left to do
    assert "0 problems added" in capsys.readouterr().err
    assert main(args + ["--phases", "mc", "--mc-problems", "3", "--mc-completions", "2"]) == 0
    mc = list(read_jsonl(work / "mc.jsonl"))
    assert mc and all(0.0 <= r["value"] <= 1.0 and r["steps"] >= 1 for r in mc)

    relabelled = [
        {**r, "paths": [{**p, "correct": r["gold"] in "".join(p["steps"])} for p in r["paths"]]}
        for r in rows
    ]
    labels = [p["correct"] for r in relabelled for p in r["paths"]]
    if all(labels) or not any(labels):
        pytest.skip("this sample gave one class only")
    (work / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in relabelled))
    out = tmp_path / "head.safetensors"
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    train = [
        "--epochs",
        "3",
        "--hidden",
        "8",
        "--val-fraction",
        "0.34",
        "--rank-weight",
        "1",
        "--threads",
        "1",
    ]
    assert main(args + ["--phases", "features,train", *train, "--out", str(out)]) == 0
    # --threads holds for torch too (head_variants.sh shares cores this way)
    assert torch.get_num_threads() == 1
    torch.set_num_threads(threads)
    head = load_head(out)
    f = feats.load(work / "features-smollm2-135m.npz")
    assert f["layers"].tolist() == [] and f["x"].shape == (len(f["step"]), len(head.tokens))
    assert np.isfinite(f["x"]).all() and head.layers == ()
    scores = np.array([head.score_features(x) for x in f["x"]])
    assert scores.std() > 1e-4  # a head trained on real features: not a constant
    layered = tmp_path / "layer12.safetensors"
    assert (
        main(args + ["--phases", "features,train", *train, "--out", str(layered), "--layers", "12"])
        == 0
    )
    torch.set_num_threads(threads)
    f = feats.load(work / "features-smollm2-135m.npz")
    head12 = load_head(layered)
    assert f["layers"].tolist() == [12] and head12.layers == (12,) and len(head12.tokens) == 0
    assert f["x"].shape[1] == len(head.tokens) + head12.layer_width and head12.layer_width == 576
    scores12 = np.array([head12.score_features(x) for x in feats.select(f, (12,))["x"]])
    assert scores12.std() > 1e-4 and not np.allclose(scores12, scores, atol=1e-3)
    # the same file trains a head on the final layer too: without --layers the head reads the logits
    # alone
    assert main(args + ["--phases", "train", *train, "--out", str(out)]) == 0
    torch.set_num_threads(threads)
    assert load_head(out).layers == () and len(load_head(out).mean) == len(head.tokens)
    report = json.loads((work / "report.json").read_text())
    assert report["rows"] == len(scores) and report["mc_rows"] == sum(~np.isnan(f["mc"]))
    assert report["config"]["rank_weight"] == 1.0 and "val_within_step_auc" in report
    assert (work / "calibration.png").stat().st_size > 1000


def test_beam_rollouts_add_the_paths_a_search_keeps_and_their_judge_scores_stay_out(
    smollm2_path, dataset, tmp_path
):
    """--strategy beam: the rollouts are a PRM-guided search's final paths; features over both files
    give each problem both kinds of path, and only the independent samples keep the rollout PRM's
    scores (the report's baseline): a search's paths were chosen by that PRM."""
    work = tmp_path / "work"
    args = ["train-prm", *TINY, "--dataset", str(dataset), "--work", str(work)]
    beam = work / "beam.jsonl"
    assert main(args + ["--phases", "rollouts", "--samples", "2"]) == 0
    assert (
        main(
            args
            + [
                "--phases",
                "rollouts",
                "--beams",
                "2",
                "--strategy",
                "beam",
                "--width",
                "2",
                "--rollouts",
                str(beam),
            ]
        )
        == 0
    )  # --beams is --samples: the later of TINY's 4 and 2
    lines = list(read_jsonl(beam))
    assert sorted(r["id"] for r in lines) == ["c0", "c1", "c2"] and {
        r["search"] for r in lines
    } == {"beam"}
    assert all(
        1 <= len(r["paths"]) <= 2 and all(len(p["prm"]) == len(p["steps"]) for p in r["paths"])
        for r in lines
    )
    assert {r["search"] for r in read_jsonl(work / "rollouts.jsonl")} == {"best-of-n"}
    assert (
        main(
            args
            + [
                "--phases",
                "features",
                "--rollouts",
                str(work / "rollouts.jsonl"),
                "--rollouts",
                str(beam),
                "--threads",
                "1",
            ]
        )
        == 0
    )
    f = feats.load(work / "features-smollm2-135m.npz")
    samples = {
        (r["id"], tuple(p["steps"]))
        for r in read_jsonl(work / "rollouts.jsonl")
        for p in r["paths"]
    }
    merged = [
        (r["id"], tuple(p["steps"]))
        for r in merge_rollouts([work / "rollouts.jsonl", beam])
        for p in r["paths"]
    ]
    assert set(merged) - samples, "the beam kept no path the samples lack"
    assert set(merged) == samples | {
        (r["id"], tuple(p["steps"])) for r in lines for p in r["paths"]
    }
    # rows: path by path
    from_samples = np.concatenate([[key in samples] * len(key[1]) for key in merged])
    assert len(f["step"]) == len(from_samples)
    assert np.isfinite(f["prm"][from_samples]).all() and np.isnan(f["prm"][~from_samples]).all()


@pytest.mark.parametrize("flag", ["--samples", "--beams"])
def test_samples_and_beams_name_one_setting(flag):
    args = build_parser().parse_args(["train-prm", flag, "3"])
    assert args.beams == 3 and not hasattr(args, "samples")


def test_a_beam_that_cannot_be_built_is_refused_before_any_model_loads(tmp_path, capsys, dataset):
    code = main(
        [
            "train-prm",
            "--model",
            "/nowhere/model.gguf",
            "--dataset",
            str(dataset),
            "--work",
            str(tmp_path),
            "--phases",
            "rollouts",
            "--strategy",
            "beam",
            "--samples",
            "6",
            "--width",
            "4",
        ]
    )
    assert code == 2 and "--beams" in capsys.readouterr().err


def test_training_data_without_answers_is_one_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "problem": "What is 1 + 1?"}) + "\n")
    assert (
        main(
            [
                "train-prm",
                *TINY,
                "--dataset",
                str(bad),
                "--work",
                str(tmp_path / "w"),
                "--phases",
                "rollouts",
            ]
        )
        == 2
    )
    assert "answer" in capsys.readouterr().err


@pytest.mark.parametrize("dataset", [None, "absent.jsonl"])
def test_the_dataset_is_checked_before_the_model_loads(tmp_path, capsys, dataset):
    """A missing --dataset was named only once the generator had loaded (or been pulled: 1.1 GB by
    default)."""
    given = ["--dataset", str(tmp_path / dataset)] if dataset else []
    assert (
        main(
            [
                "train-prm",
                "--model",
                str(tmp_path / "absent.gguf"),
                "--work",
                str(tmp_path / "w"),
                "--phases",
                "rollouts",
                *given,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert ("dataset file not found" if dataset else "the rollouts phase needs --dataset") in err


def test_mc_phase_without_rollouts_or_problems_says_what_to_give(tmp_path, capsys):
    args = ["train-prm", "--model", "smollm2-135m", "--work", str(tmp_path), "--phases", "mc"]
    assert main(args) == 2
    assert "--mc-problems N" in capsys.readouterr().err
    # mc named beside another phase, still without problems
    assert main(args[:-1] + ["mc,features"]) == 2
    assert "leave mc out of --phases" in capsys.readouterr().err
    (tmp_path / "rollouts.jsonl").write_text("")
    assert main(args + ["--mc-problems", "3"]) == 2
    assert "run the rollouts phase first" in capsys.readouterr().err


def test_train_phase_without_features_says_what_to_run(tmp_path, capsys):
    assert (
        main(["train-prm", "--model", "smollm2-135m", "--work", str(tmp_path), "--phases", "train"])
        == 2
    )
    assert "run the features phase first" in capsys.readouterr().err


@pytest.mark.parametrize("phases", ["", " , "])
def test_no_phase_is_a_clear_error(tmp_path, capsys, phases):
    assert (
        main(["train-prm", "--model", "smollm2-135m", "--work", str(tmp_path), "--phases", phases])
        == 2
    )
    assert "--phases needs at least one of rollouts, mc, features, train" in capsys.readouterr().err


def test_a_work_folder_that_cannot_be_made_is_a_clear_error(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    assert (
        main(["train-prm", "--model", "smollm2-135m", "--work", str(afile), "--phases", "train"])
        == 2
    )
    assert f"--work {afile} is a file" in capsys.readouterr().err
    assert (
        main(
            [
                "train-prm",
                "--model",
                "smollm2-135m",
                "--work",
                str(afile / "sub"),
                "--phases",
                "train",
            ]
        )
        == 2
    )
    assert "cannot make the --work folder" in capsys.readouterr().err
    assert afile.read_text() == "not a folder"


GOOD_ROLLOUT = {
    "id": "a",
    "problem": "1+1?",
    "gold": "2",
    "paths": [{"steps": ["2"], "correct": True}],
}


@pytest.mark.parametrize(
    "file, line, message",
    [
        ("rollouts.jsonl", '{"id": ["b"], "problem": "q", "gold": "1", "paths": []}', "line 2: id"),
        ("rollouts.jsonl", '{"id": "b", "problem": "q", "gold": "1", "paths": null}', "paths"),
        ("rollouts.jsonl", '{"id": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deep"),
        ("mc.jsonl", '{"id": "a", "path": 0, "steps": 1, "value": "x"}', "line 1: value must"),
    ],
    ids=["rollout id", "rollout paths", "rollout nesting", "mc value"],
)
def test_a_damaged_rollouts_or_mc_file_is_one_line_before_the_backbone_loads(
    tmp_path, capsys, file, line, message
):
    """TypeError, ValueError or RecursionError tracebacks (issue 62, item 3)."""
    (tmp_path / "rollouts.jsonl").write_text(json.dumps(GOOD_ROLLOUT) + "\n")
    with (tmp_path / file).open("a") as f:
        f.write(line + "\n")
    argv = ["train-prm", "--model", "smollm2-135m", "--work", str(tmp_path), "--phases", "features"]
    assert main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith(f"edgereason: error: {tmp_path / file}: ")
    assert message in err[0] and "unexpected" not in err[0]


@pytest.mark.parametrize(
    "damage, message",
    [
        ("cut short", "not a whole feature file"),
        ("a field missing", "not a whole feature file"),
        ("random bytes", "not a feature file (not an .npz archive)"),
        ("one .npy array", "not a feature file (not an .npz archive)"),
    ],
)
def test_a_damaged_feature_file_is_one_clear_error(tmp_path, capsys, smollm2_path, damage, message):
    """A zipfile.BadZipFile or KeyError traceback before; random bytes were called pickled data to
    load with allow_pickle, and a .npy array was a TypeError traceback."""
    good = {k: np.zeros(2, np.float32) for k in feats.FIELDS}
    path = tmp_path / "features.npz"
    feats.save(path, good)
    if damage == "cut short":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "a field missing":
        feats.save(path, {k: v for k, v in good.items() if k != "mc"})
    elif damage == "random bytes":
        path.write_bytes(np.random.default_rng(0).bytes(2000))
    else:
        with path.open("wb") as f:
            np.save(f, good["x"])
    assert (
        main(
            [
                "train-prm",
                "--model",
                "smollm2-135m",
                "--work",
                str(tmp_path / "w"),
                "--phases",
                "train",
                "--features",
                str(path),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert (
        f"cannot train on {path}: {message}" in err
        and "Traceback" not in err
        and "pickle" not in err
    )


def test_a_head_too_large_for_memory_is_one_clear_error(tmp_path, capsys, smollm2_path):
    """torch's allocator failed with a RuntimeError traceback."""
    rng = np.random.default_rng(0)
    problem = np.repeat(np.arange(8), 4).astype(np.int32)
    n = len(problem)
    features = {
        "tokens": np.arange(4, dtype=np.int32),
        "x": rng.normal(size=(n, 4)).astype(np.float16),
        "problem": problem,
        "path": np.tile(np.arange(4), 8).astype(np.int32),
        "step": np.zeros(n, np.int32),
        "last": np.ones(n, bool),
        "outcome": (np.arange(n) % 2).astype(np.float32),
        "mc": np.full(n, np.nan, np.float32),
        "prm": rng.random(n).astype(np.float32),
        "weight": np.ones(n, np.float32),
    }
    path = tmp_path / "features.npz"
    feats.save(path, features)
    assert (
        main(
            [
                "train-prm",
                "--model",
                "smollm2-135m",
                "--work",
                str(tmp_path / "w"),
                "--phases",
                "train",
                "--features",
                str(path),
                "--hidden",
                str(10**12),
                "--out",
                str(tmp_path / "head"),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert (
        f"training a head of --hidden {10**12} units on {n} steps ran out of memory; lower --hidden"
        in err
    )
    assert "Traceback" not in err and not (tmp_path / "head.safetensors").exists()


@pytest.mark.parametrize(
    "phase, flag", [("rollouts", "--rollouts"), ("features", "--features"), ("train", "--out")]
)
@pytest.mark.parametrize("under", ["afile", "afile/sub"])
def test_an_output_that_cannot_be_written_is_refused_before_any_phase(
    tmp_path, capsys, phase, flag, under
):
    """Found only when the phase wrote it: a FileExistsError traceback after the first rollout,
    after the whole feature extraction or after the whole training."""
    (tmp_path / "afile").write_text("not a folder")
    out = tmp_path / under / "output"
    assert (
        main(
            [
                "train-prm",
                *TINY,
                "--work",
                str(tmp_path / "w"),
                "--phases",
                phase,
                "--dataset",
                str(tmp_path / "absent.jsonl"),
                flag,
                str(out),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert (
        f"cannot write {flag} {out}: {tmp_path / 'afile'} is a file" in err
        and "Traceback" not in err
    )
    assert (tmp_path / "afile").read_text() == "not a folder"


@pytest.mark.parametrize(
    "phase, flag", [("rollouts", "--rollouts"), ("features", "--features"), ("train", "--out")]
)
def test_a_compressed_output_is_refused_before_any_phase(tmp_path, capsys, phase, flag):
    """.gz files are read through gzip; the rollouts phase appended plain lines to one, which then
    read as nothing."""
    out = tmp_path / "rollouts.jsonl.gz"
    out.write_bytes(gzip.compress(b'{"id": "1"}\n'))
    before = out.read_bytes()
    assert (
        main(
            [
                "train-prm",
                *TINY,
                "--work",
                str(tmp_path / "w"),
                "--phases",
                phase,
                "--dataset",
                str(tmp_path / "absent.jsonl"),
                flag,
                str(out),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert (
        f"{flag} {out} is compressed and this phase writes plain lines; give a path without .gz"
        in err
    )
    assert "Traceback" not in err and out.read_bytes() == before


@pytest.mark.parametrize(
    "phase, flag", [("rollouts", "--rollouts"), ("features", "--features"), ("train", "--out")]
)
def test_an_output_that_names_a_folder_is_refused_before_any_phase(tmp_path, capsys, phase, flag):
    """`--out heads/` wrote heads.safetensors beside the folder; --rollouts and --features failed
    after the work."""
    folder = tmp_path / "heads"
    folder.mkdir()
    assert (
        main(
            [
                "train-prm",
                *TINY,
                "--work",
                str(tmp_path / "w"),
                "--phases",
                phase,
                "--dataset",
                str(tmp_path / "absent.jsonl"),
                flag,
                str(folder),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert (
        f"{flag} {folder} is a folder; give a file path in it, such as {folder}/" in err
        and "Traceback" not in err
    )
    assert list(folder.iterdir()) == [] and not (tmp_path / "heads.safetensors").exists()


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--val-fraction", "1.5", "--val-fraction must be in (0, 1)"),
        ("--val-fraction", "nan", "--val-fraction must be in (0, 1)"),
        ("--rank-weight", "inf", "--rank-weight must be a finite number"),
        ("--epochs", "0", "training settings must be positive"),
        ("--hidden", "-1", "training settings must be positive"),
    ],
)
def test_training_settings_are_refused_before_any_phase(
    tmp_path, capsys, dataset, flag, value, message
):
    """Refused by the train phase before: after hours of rollouts and feature extraction."""
    assert (
        main(
            [
                "train-prm",
                *TINY,
                "--model",
                str(tmp_path / "absent.gguf"),
                "--work",
                str(tmp_path / "w"),
                "--dataset",
                str(dataset),
                flag,
                value,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert message in err and "model file not found" not in err and "Traceback" not in err
    assert not (tmp_path / "w" / "rollouts.jsonl").exists()


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--threads", "-1", "--threads must be positive, got -1"),
        ("--threads", "0", "--threads must be positive, got 0"),
        ("--threads", "100000", "--threads 100000 is more than"),
        ("--kv-tokens", "0", "at least 256 KV tokens; raise --kv-tokens"),
        ("--gpu-layers", "-1", "--gpu-layers must be >= 0"),
    ],
)
@pytest.mark.parametrize("phases", ["features", "train"])
def test_runtime_settings_are_refused_before_any_phase(
    tmp_path, capsys, flag, value, message, phases
):
    """Checked by the rollouts phase's session alone: --threads -1 was a RuntimeError traceback from
    torch after the features phase, --kv-tokens 0 a message about a "KV share" once the features
    phase had started."""
    assert (
        main(
            [
                "train-prm",
                "--model",
                str(tmp_path / "absent.gguf"),
                "--work",
                str(tmp_path / "w"),
                "--phases",
                phases,
                flag,
                value,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
