"""Device reading, profile files, and a real (shortened) profile run of SmolLM2."""

from __future__ import annotations

import json
import os

import pytest

from edgereason import models
from edgereason.cli.main import main
from edgereason.errors import ConfigError
from edgereason.memory import default_device_id, device, find_profile, verifier_id
from edgereason.memory.profile_store import profile_path, write_profile
from edgereason.profiler import run as profiler
from edgereason.profiler.run import MeasurePoints, run_profile
from edgereason.profiler.workload import SampleSearch
from edgereason.session.settings import ModelSettings

TINY = MeasurePoints(decode_seqs=(1, 2), decode_steps=2, prefill_tokens=(32, 64), prefill_reps=1)
REQUIRED = {
    "generator_kv_tokens",
    "verifier_kv_tokens",
    "generator_kv_bytes",
    "verifier_kv_bytes",
    "lv_threshold_tokens",
    "profile_path",
    "curves",
    "device",
    "generator",
    "verifier",
    "budget_bytes",
    "predicted",
}


@pytest.fixture()
# smollm2_path first: it resolves under the real home
def home(tmp_path, monkeypatch, smollm2_path):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    return tmp_path


def test_cpu_device_id_is_file_safe():
    dev_id = default_device_id()
    assert dev_id.startswith("cpu-") and dev_id.endswith("c")
    assert all(ch.isalnum() or ch in "-." for ch in dev_id) and dev_id == dev_id.lower()
    assert device.read_cpu().free_bytes > 0


def test_short_cpu_names():
    assert device._short_cpu_name("AMD EPYC 7763 64-Core Processor") == "amd-epyc-7763"
    assert (
        device._short_cpu_name("Intel(R) Core(TM) i7-10750H CPU @ 2.60GHz")
        == "intel-core-i7-10750h"
    )


def test_gpu_without_nvidia_is_a_config_error(monkeypatch):
    import pynvml

    def no_driver():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", no_driver)
    with pytest.raises(ConfigError, match="NVIDIA"):
        device.read_device("gpu")


def test_auto_budget_margin_and_cap():
    gib = 1 << 30
    assert device.auto_budget(10 * gib, 2 * gib, 1, 1) == 2 * device.AUTO_MAX_TOKENS  # capped
    # 10% margin
    assert device.auto_budget(10 * gib, 2 * gib, 10**6, 10**6) == 8 * gib - int(0.1 * 8 * gib)
    # at least 256 MiB
    assert device.auto_budget(gib, gib // 2, 10**6, 10**6) == gib // 2 - (256 << 20)
    with pytest.raises(ConfigError, match="no memory left"):
        device.auto_budget(gib, gib, 1, 1)


def test_find_profile_misses_and_ignores_damaged_files(home):
    assert find_profile("cpu-x-1c", "a", "b-judge") is None
    (home / "profiles").mkdir()
    (home / "profiles" / "cpu-x-1c__a__b-judge.json").write_text("{not json")
    assert find_profile("cpu-x-1c", "a", "b-judge") is None


def test_real_profile_run_writes_a_findable_profile(home, smollm2_path):
    budget = 64 << 20
    settings = ModelSettings(model=str(smollm2_path), n_gpu_layers=0)
    profile = run_profile(settings, SampleSearch(), budget="64MiB", points=TINY)
    data = profile.to_dict()
    key = (profile.device.device_id, profile.generator, profile.verifier)
    damaged = profile_path(*key)  # a profile cut short earlier: measuring writes it whole again
    damaged.parent.mkdir(parents=True)
    damaged.write_text('{"generator_kv_bytes": 1')
    assert find_profile(*key) is None
    path = write_profile(data, *key)
    assert path.parent == home / "profiles" and path.is_file()
    stored = json.loads(path.read_text())
    assert REQUIRED <= set(stored)
    assert stored["budget_bytes"] == budget
    assert (
        stored["generator_kv_tokens"] * stored["generator_kv_bytes_per_token"]
        + stored["verifier_kv_tokens"] * stored["verifier_kv_bytes_per_token"]
    ) <= budget
    assert stored["generator_kv_bytes"] + stored["verifier_kv_bytes"] <= budget
    # TINY's points and the 4 beams at once
    assert [n for n, _ in stored["curves"]["generator"]] == [1, 2, 4]
    assert all(tps > 0 for _, tps in stored["curves"]["verifier"])
    assert stored["lv_threshold_tokens"] in (32, 64)
    assert stored["predicted"]["best"]["step_time_s"] > 0
    gen_name = models.display_name(str(smollm2_path))
    assert (
        find_profile(default_device_id(), gen_name, verifier_id(str(smollm2_path), "judge"))
        == stored
    )


def test_cli_json_and_plot(home, smollm2_path, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(profiler, "MeasurePoints", lambda: TINY)
    plot = tmp_path / "curves.png"
    rc = main(
        [
            "memory-profile",
            "--generator",
            str(smollm2_path),
            "--budget",
            "24MiB",
            "--json",
            "--plot",
            str(plot),
        ]
    )
    out = capsys.readouterr()
    assert rc == 0, out.err
    data = json.loads(out.out)
    assert REQUIRED <= set(data) and data["budget_bytes"] == 24 << 20
    # auto on a CPU, under the name profiles had before the backend was recorded
    assert data["backend"] == "llamacpp"
    assert data["profile_path"].endswith("-judge.json")
    # llama.cpp's weights: the file's
    assert data["generator_weights_bytes"] == smollm2_path.stat().st_size
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert "generator decode" in out.err  # progress goes to stderr, keeping stdout JSON


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--budget", "lots"], "not a size"),
        (["--budget", "1MiB"], "fits no split"),
        # said to lower --beams, which changes nothing
        (["--steps", str(10**9)], "raise --kv-budget or lower --steps"),
        (["--threads", "0"], "--threads"),
        (["--beams", "0"], "must be positive"),  # was refused only after the curves were measured
        (["--beams", "3", "--width", "2"], "pick --beams 2 or another --width"),
        (["--problem", "What is 2 + 3?", "--problem", " "], "a --problem is empty"),
    ],
)
def test_cli_errors_are_one_line(home, smollm2_path, capsys, argv, message):
    assert main(["memory-profile", "--generator", str(smollm2_path), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert "generator decode" not in err  # refused before measuring


def test_threads_past_the_cpus_are_refused_as_solve_refuses_them(home, smollm2_path, capsys):
    """memory-profile --threads 64 on a 2-core machine loaded the models and measured with 64
    spinning threads."""
    too_many = str((os.cpu_count() or 1) + 1)
    assert (
        main(["solve", "--model", str(smollm2_path), "--threads", too_many, "What is 2 + 3?"]) == 2
    )
    refused = capsys.readouterr().err
    assert main(["memory-profile", "--model", str(smollm2_path), "--threads", too_many]) == 2
    err = capsys.readouterr().err
    assert err == refused and f"--threads {too_many} is more than this machine's" in err, err
    assert len(err.splitlines()) == 1, err  # the error alone: nothing loaded or measured before it


LONG = "What is 2 + 3? " * 2000  # well over the 8,192 tokens of SmolLM2's trained context


@pytest.mark.parametrize(
    "argv, message",
    [
        # the sample search gave up on them after the curves (half a minute here, minutes with a
        # larger model)
        (
            ["--beams", "512"],
            "--beams 512 is more than one search can hold: the generator runs at most 256 "
            "sequences at once, one a beam; pick --beams 256 or fewer",
        ),
        (["--beams", "300", "--width", "3"], "pick --beams 255 or fewer"),  # a multiple of --width
        (["--beams", "512", "--width", "512"], "pick a --width and --beams of at most 256"),
        # was: pick --beams 1000
        (["--width", "1000"], "--width 1000: pick a --width that divides 4"),
        (
            ["--requests", "300"],
            "--requests 300 searches of 4 beams need 1200 sequences to run at once",
        ),
        # 65 x 4 beams: 64 would run and one wait, so the peaks measured would be of 64 searches,
        # not the 65 modelled
        (["--requests", "65"], "pick --requests 64 or fewer, or lower --beams"),
        (["--requests", "9", "--beams", "32", "--width", "4"], "pick --requests 8 or fewer"),
        # made a list of 10**9 problems first
        (["--requests", str(10**9)], "pick --requests 64 or fewer"),
        (["--problem", LONG], "was trained on at most 8192 tokens of context; shorten the problem"),
        (["--problem", "What is 2 + 3?", "--problem", LONG], "error: --problem 2: the problem is "),
        (
            ["--problem", "Tom has 3 apples and buys 2 more. " * 120, "--kv-budget", "24MiB"],
            "the --problem texts make a prompt of",
        ),  # said "fits no split ... lower --steps", not the problem
    ],
)
def test_what_no_search_can_hold_is_refused_before_measuring(
    home, smollm2_path, capsys, argv, message
):
    assert main(["memory-profile", "--model", str(smollm2_path), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err  # the error alone: no progress of measuring before it


def test_a_plot_that_cannot_be_written_is_refused_before_measuring(
    home, smollm2_path, capsys, tmp_path
):
    (tmp_path / "afile").write_text("")
    for plot, message in (
        (tmp_path, "is a folder"),
        (tmp_path / "x.txt", "ending in .png"),
        (tmp_path / "none" / "x.png", "does not exist"),
        (tmp_path / "afile" / "x.png", f"{tmp_path / 'afile'} is a file, not a folder"),
    ):
        assert main(["memory-profile", "--generator", str(smollm2_path), "--plot", str(plot)]) == 2
        err = capsys.readouterr().err
        assert message in err and "generator decode" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "profiles"]
    assert not tmp_path.with_suffix(".png").exists()


def test_a_home_where_profiles_cannot_be_written_is_refused_before_measuring(
    tmp_path, monkeypatch, smollm2_path, capsys
):
    """A NotADirectoryError traceback once the minute of measuring was done, the profile lost."""
    home = tmp_path / "home"
    home.write_text("a file where the cache should be")
    monkeypatch.setenv("EDGEREASON_HOME", str(home))
    assert (
        main(["memory-profile", "--model", str(smollm2_path), "--kv-budget", "64MiB", "--json"])
        == 2
    )
    out = capsys.readouterr()
    assert json.loads(out.out)["error"].startswith(
        f"cannot write memory profiles to {home / 'profiles'}: "
    )
    assert (
        "set EDGEREASON_HOME to a folder you can write" in out.err
        and "generator decode" not in out.err
    )
    assert home.read_text() == "a file where the cache should be"


def test_a_folder_where_the_profile_goes_is_refused_before_measuring(home, smollm2_path, capsys):
    """An IsADirectoryError traceback once the measuring was done, the profile lost and nothing on
    stdout."""
    model = str(smollm2_path)
    path = profile_path(
        default_device_id(), models.display_name(model), verifier_id(model, "judge")
    )
    path.mkdir(parents=True)
    assert main(["memory-profile", "--model", model, "--kv-budget", "64MiB", "--json"]) == 2
    out = capsys.readouterr()
    assert (
        json.loads(out.out)["error"] == f"{path} is a folder where the profile goes; move it away"
    )
    assert "Traceback" not in out.err and "generator decode" not in out.err
    assert path.is_dir() and not list(path.parent.glob(".*.tmp"))


@pytest.mark.slow
def test_an_hf_prm_is_profiled_on_torch_and_its_split_is_used(home, smollm2_path, tiny_hf_path):
    """memory-profile with a torch PRM: its own KV bytes per token, a prefill curve measured on
    torch, its sample search; a session of the same pair then splits its budget by that profile."""
    from edgereason.session.opening import open_session

    prm = f"hf:{tiny_hf_path}"
    profile = run_profile(
        ModelSettings(model=str(smollm2_path), prm=prm, prm_format="judge", n_gpu_layers=0),
        SampleSearch(beams=2, width=2, steps=2, max_step_tokens=16),
        budget="64MiB",
        points=TINY,
    )
    data = profile.to_dict()
    write_profile(data, profile.device.device_id, profile.generator, profile.verifier)
    assert data["verifier"] == "hf-tiny-judge"
    # the tiny config's K+V in fp32, not a GGUF's
    assert data["verifier_kv_bytes_per_token"] == 2 * 2 * 2 * 8 * 4
    assert [b for b, _ in data["curves"]["verifier"]] == [32, 64] and all(
        t > 0 for _, t in data["curves"]["verifier"]
    )
    assert profile.workload.verifier_peak_tokens > 0 and profile.workload.head_tokens > 0
    settings = ModelSettings(
        model=str(smollm2_path),
        prm=prm,
        prm_format="judge",
        prm_device="cpu",
        kv_budget_bytes=64 << 20,
    )
    session = open_session(settings)
    try:
        assert session.profile is not None and session.lv_threshold == data["lv_threshold_tokens"]
        assert session.verifier.kv_capacity_tokens == data["verifier_kv_bytes"] // 256
    finally:
        session.close()
