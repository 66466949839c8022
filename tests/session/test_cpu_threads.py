"""The threads llama.cpp gets where --threads is not given: the rule on faked loads, and a real
solve beside a process that spins on a core."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edgereason.backends import Placement
from edgereason.session import cpu_threads
from edgereason.session.cpu_threads import fit_threads_to_load, free_core_threads, threads_for
from edgereason.session.settings import ModelSettings

REPO = Path(__file__).resolve().parents[2]
SPIN_S = 120  # the spinner's bound, should the test die before it ends it


def test_an_idle_machine_gets_every_core_and_no_note() -> None:
    assert threads_for(8, busy=0.3) == cpu_threads.ThreadChoice(8, None)


def test_a_core_held_at_least_half_is_left_out_and_said() -> None:
    choice = threads_for(2, busy=1.0)
    assert choice.threads == 1
    assert choice.note == (
        "edgereason: 1 of 2 cores is busy (load 1.0): running llama.cpp on 1 thread; "
        "--threads N overrides"
    )
    assert threads_for(8, busy=2.5).threads == 5  # 3 cores taken
    assert threads_for(8, busy=2.4).threads == 6


def test_a_full_machine_still_runs_one_thread() -> None:
    choice = threads_for(2, busy=3.7)
    assert choice.threads == 1 and choice.note.startswith("edgereason: 2 of 2 cores are busy")


def test_the_chat_keeps_a_core_for_its_ui_beside_the_busy_ones() -> None:
    assert threads_for(4, busy=0.0, keep=1) == cpu_threads.ThreadChoice(3, None)
    assert threads_for(4, busy=1.0, keep=1).threads == 2
    assert threads_for(2, busy=1.0, keep=1).threads == 1


def test_the_load_is_read_from_psutil_as_physical_cores(monkeypatch) -> None:
    monkeypatch.setattr(cpu_threads, "physical_cores", lambda: 4)
    monkeypatch.setattr(cpu_threads.psutil, "cpu_percent", lambda interval: 50.0)
    assert free_core_threads().threads == 2


def test_threads_given_or_a_gpu_or_another_backend_are_left_as_they_are(monkeypatch) -> None:
    monkeypatch.setattr(cpu_threads.psutil, "cpu_percent", lambda interval: 100.0)
    given, place = ModelSettings(threads=2), Placement(n_threads=2)
    assert fit_threads_to_load(given, place, "llamacpp") == (given, place, None)
    on_gpu, on_gpu_place = ModelSettings(n_gpu_layers=999), Placement(n_gpu_layers=999)
    assert fit_threads_to_load(on_gpu, on_gpu_place, "llamacpp") == (on_gpu, on_gpu_place, None)
    assert fit_threads_to_load(ModelSettings(), Placement(), "torch") == (
        ModelSettings(),
        Placement(),
        None,
    )
    fitted, fitted_place, note = fit_threads_to_load(ModelSettings(), Placement(), "llamacpp")
    assert fitted.threads == fitted_place.n_threads == 1 and " busy (load " in note.text


def spin() -> subprocess.Popen:
    code = f"import time\nend = time.time() + {SPIN_S}\nwhile time.time() < end: pass\n"
    proc = subprocess.Popen([sys.executable, "-c", code])
    time.sleep(0.5)  # started and spinning
    return proc


@pytest.mark.slow
def test_solve_beside_a_spinning_process_says_so_and_runs_fewer_threads(smollm2_path) -> None:
    argv = ["solve", "What is 2 + 3?", "--model", "smollm2-135m", "--max-steps", "1"]
    argv += ["--max-step-tokens", "8", "--beams", "2", "--width", "2"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    spinner = spin()
    try:
        run = [sys.executable, "-m", "edgereason", *argv]
        proc = subprocess.run(run, env=env, capture_output=True, text=True, timeout=300)
        given = subprocess.run(
            [*run, "--threads", "1"], env=env, capture_output=True, text=True, timeout=300
        )
    finally:
        spinner.kill()
        spinner.wait()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert " busy (load " in proc.stderr and "--threads N overrides" in proc.stderr
    assert given.returncode == 0 and "busy (load" not in given.stderr
