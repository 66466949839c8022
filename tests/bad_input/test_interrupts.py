"""Stop signals at awkward moments (issue 17, items 5 and 6), each reproduced first. A stop ends the
run with 128 + the signal's number and one line, never a traceback, and leaves no temp folder and no
pip process behind.

- Ctrl-C while the model loads: llama.cpp calls back into Python during the load, where ctypes used
  to print the KeyboardInterrupt and drop it (the run went on and exited 0); now exit 130. SIGINT is
  sent the moment the GGUF file shows up in the process's memory map, three times.
- Ctrl-C while the package imports llama.cpp, and while the commands import theirs (numpy, sympy,
  ...): exit 130, no traceback, through the installed console script. SIGINT is sent the moment a
  library of that stage shows up in the memory map.
- Ctrl-C, SIGTERM and a closed terminal (SIGHUP) in the middle of a model download: exit 130, 143,
  129; the pull's temp folder is removed and pip is stopped.
- a bench stopped by Ctrl-C or SIGTERM mid-run: results.json keeps the problems that finished, and
  the exit code and last line name the signal (SIGTERM gave 130 and "interrupted").
- the chat stopped by SIGTERM or a closed terminal (SIGHUP): exit 143 or 129 with the terminal given
  back (it used to die on the spot, in the app's screen mode); Ctrl-C in its terminal with no search
  running: exit 130 (it showed a pop-up asking for Ctrl+Q).
- interrupts.deferred(): a signal inside the block only sets requested(); it is raised when the
  block ends, in place of what the ended call raised; nested blocks and other threads leave the
  handlers alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from child_processes import (
    edgereason,
    hanging_index,
    open_chat,
    pull_env,
    pull_folders,
    wait_for,
    wait_for_drawing,
    wait_for_exit,
)

from edgereason.util import interrupts

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
CONSOLE_SCRIPT = Path(sys.executable).with_name("edgereason")


def maps(pid: int, *names: str) -> bool:
    """Whether a file whose path contains one of `names` is mapped into the process (a library
    loaded, a GGUF mmapped)."""
    try:
        mapped = Path(f"/proc/{pid}/maps").read_text()
    except OSError:  # the process is gone
        return False
    return any(name in mapped for name in names)


pytestmark = pytest.mark.skipif(
    not Path("/proc/self/maps").exists(), reason="reads /proc/PID/maps (Linux)"
)


@pytest.fixture
def python_sigint() -> Iterator[None]:
    """Python's own Ctrl-C handler for a test that signals this process: a shell starts a background
    job (`pytest &`) with SIGINT ignored, which `interrupts` rightly leaves ignored (as
    `default_stop_signals` does for children)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_while_the_model_loads_exits_130(smollm2_path) -> None:
    for _ in range(3):
        proc = edgereason("solve", "What is 1 + 1?", "--model", str(smollm2_path), *TINY_FLAGS)
        wait_for(
            lambda proc=proc: maps(proc.pid, smollm2_path.name) or proc.poll() is not None,
            "the model load",
            every_s=0.0002,
        )
        proc.send_signal(signal.SIGINT)
        out, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 130 and not out, stderr
        assert "Traceback" not in stderr and stderr.splitlines()[-1] == "edgereason: interrupted", (
            stderr
        )


LOADED_BY = """
import re, sys
def libraries():
    return set(re.findall(r"[^/\\s]+\\.so[.0-9]*", open("/proc/self/maps").read()))
before = libraries()
import edgereason
package = libraries()
from edgereason.cli.main import build_parser
build_parser()
loaded = package - before if sys.argv[1] == "package" else libraries() - package
print(" ".join(sorted(loaded)))
"""


def libraries_loaded_by(stage: str) -> list[str]:
    """Shared libraries that `import edgereason` loads ("package"), or that the command's own
    imports load after it ("commands"): a Ctrl-C the moment one shows up lands in that stage. Found,
    not listed: they change as the code does."""
    found = subprocess.run(
        [sys.executable, "-c", LOADED_BY, stage], capture_output=True, text=True, check=True
    )
    assert found.stdout.split(), f"no library loads during the {stage} imports"
    return found.stdout.split()


@pytest.mark.skipif(
    not CONSOLE_SCRIPT.exists(), reason="the console script is not installed beside python"
)
@pytest.mark.parametrize("stage", ["package", "commands"])
def test_ctrl_c_while_libraries_import_exits_130_without_traceback(stage) -> None:
    markers = libraries_loaded_by(stage)
    proc = edgereason("models", "list", command=[str(CONSOLE_SCRIPT)])
    wait_for(
        lambda: maps(proc.pid, *markers) or proc.poll() is not None,
        f"the {stage} imports",
        every_s=0.0002,
    )
    proc.send_signal(signal.SIGINT)
    out, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in stderr and not out, stderr


@pytest.mark.parametrize(
    "signum, code, line",
    [
        (signal.SIGINT, 130, "edgereason: interrupted"),
        (signal.SIGTERM, 143, "edgereason: stopped by SIGTERM"),
        (signal.SIGHUP, 129, "edgereason: stopped by SIGHUP"),
    ],
)
def test_stop_signal_during_a_download_removes_its_folder_and_stops_pip(
    tmp_path, signum, code, line
) -> None:
    home = tmp_path / "home"
    with hanging_index() as index:
        proc = edgereason("models", "pull", "smollm2-135m", env=pull_env(home, index))
        wait_for(
            lambda: proc.poll() is not None or psutil.Process(proc.pid).children(),
            "pip to start",
            every_s=0.01,
        )
        assert len(pull_folders(home)) == 1
        pip = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == code and "Traceback" not in stderr, stderr
    assert stderr.splitlines()[-1] == line
    assert not pull_folders(home)
    _, alive = psutil.wait_procs(pip, timeout=10)
    assert not alive


@pytest.mark.parametrize(
    "signum, code, word",
    [
        (signal.SIGINT, 130, "interrupted"),
        # was 130 and "interrupted": the bench dropped which stop it was
        (signal.SIGTERM, 143, "stopped by SIGTERM"),
    ],
)
def test_a_stopped_bench_keeps_what_finished_and_exits_by_the_signal(
    tmp_path, smollm2_path, signum, code, word
) -> None:
    data = tmp_path / "three.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "problem": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n"
            for i in range(3)
        )
    )
    out = tmp_path / "out"
    proc = edgereason(
        "bench",
        "--dataset",
        str(data),
        "--out",
        str(out),
        "--model",
        str(smollm2_path),
        "--policies",
        "baseline",
        "--concurrency",
        "1",
        "--no-plots",
        *TINY_FLAGS,
    )
    err: list[str] = []  # the progress bar redraws one line: read it a character at a time
    reader = threading.Thread(
        target=lambda: err.extend(iter(lambda: proc.stderr.read(1), "")), daemon=True
    )
    reader.start()
    wait_for(
        lambda: "] 1/3" in "".join(err) or proc.poll() is not None, "the first problem to finish"
    )
    proc.send_signal(signum)
    proc.wait(timeout=120)
    reader.join(timeout=10)
    stderr = "".join(err)
    assert proc.returncode == code and "Traceback" not in stderr, stderr
    assert stderr.splitlines()[-1] == f"{word}: wrote 1 run(s) to {out}", stderr
    (run,) = json.loads((out / "results.json").read_text())["runs"]
    assert run["interrupted"] and 1 <= run["problems"] < 3


def test_deferred_raises_a_stop_when_the_block_ends(python_sigint) -> None:
    seen = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts.deferred():
            with interrupts.deferred():  # nested: the outer block handles it
                os.kill(os.getpid(), signal.SIGINT)
                seen.append(interrupts.requested())
            seen.append(interrupts.requested())
            raise RuntimeError("what a call ended by the stop raised")
    assert seen == [True, True] and not interrupts.requested()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_deferred_in_another_thread_leaves_handlers_alone(python_sigint) -> None:
    handlers = []

    def run() -> None:
        with interrupts.deferred():
            handlers.append(signal.getsignal(signal.SIGINT))

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    assert handlers == [signal.default_int_handler]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_chat_stopped_by_kill_or_a_closed_terminal_restores_the_terminal(
    tmp_path, smollm2_path, signum
) -> None:
    pid, fd = open_chat(tmp_path, "--model", str(smollm2_path), *TINY_FLAGS)
    output = bytearray()
    wait_for_drawing(fd, output, b"ready")
    os.kill(pid, signum)
    assert wait_for_exit(pid, fd, output) == 128 + signum
    screen_left = output.rindex(b"\x1b[?1049l")  # back from the app's screen to the shell's
    assert f"edgereason: stopped by {signal.Signals(signum).name}".encode() in output[screen_left:]


def test_ctrl_c_in_the_chat_with_no_search_running_exits_130(tmp_path, smollm2_path) -> None:
    """The README says Ctrl-C exits 130 at any moment; in the chat's terminal it showed a pop-up
    asking for Ctrl+Q, and the chat ran on."""
    pid, fd = open_chat(tmp_path, "--model", str(smollm2_path), *TINY_FLAGS)
    output = bytearray()
    wait_for_drawing(fd, output, b"ready")
    os.write(fd, b"\x03")  # Ctrl+C: the app's raw terminal sends it as a key, not as SIGINT
    assert wait_for_exit(pid, fd, output) == 130
    screen_left = output.rindex(b"\x1b[?1049l")
    assert b"edgereason: interrupted" in output[screen_left:]


@pytest.fixture
def reported(monkeypatch) -> list:
    """What reaches sys.unraisablehook (where ctypes reports an exception it drops in a callback,
    and prints it)."""
    seen: list = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: seen.append(unraisable.exc_type))
    return seen


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_dropped_in_a_c_callback_is_raised_after_the_call_and_not_printed(
    python_sigint, reported, signum
):
    """ctypes drops an exception raised in a callback (it printed a traceback): check() raises the
    signal again."""
    import ctypes

    @ctypes.CFUNCTYPE(None)
    def callback() -> None:  # the signal's handler runs here, at the callback's next bytecode
        os.kill(os.getpid(), signum)
        for _ in range(100):
            pass

    with interrupts.stop_signals():
        callback()  # C calls Python: the exception is dropped and the call returns
        with pytest.raises(KeyboardInterrupt) as caught:
            interrupts.check()
        interrupts.check()  # once only
    assert interrupts.exit_code(caught.value) == 128 + signum
    assert reported == []


def test_other_errors_dropped_in_a_c_callback_are_still_reported(reported) -> None:
    import ctypes

    @ctypes.CFUNCTYPE(None)
    def callback() -> None:
        raise ValueError("a bug in a callback")

    with interrupts.stop_signals():
        callback()
    callback()
    assert reported == [ValueError, ValueError]
