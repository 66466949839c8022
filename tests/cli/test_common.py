"""The shared flags' conversion into settings (cli/common.py): --torch-weights is the process's
choice of the torch backend's weights, read where the torch backend loads a model."""

from __future__ import annotations

import pytest

from edgereason.backends.torch import int4_choice
from edgereason.cli.common import model_settings
from edgereason.cli.main import build_parser


@pytest.mark.parametrize("command", ["solve", "bench", "chat"])
def test_torch_weights_is_the_process_choice(command, monkeypatch):
    monkeypatch.setenv(int4_choice.SWITCH, "")  # unset, and put back after the test
    problem = ["2+2?"] if command == "solve" else []
    parser = build_parser()
    model_settings(parser.parse_args([command, *problem]))
    assert int4_choice.weights_kind("cuda") == "bf16"
    model_settings(parser.parse_args([command, *problem, "--torch-weights", "int4"]))
    assert int4_choice.weights_kind("cuda") == "int4"


def test_another_kind_of_weights_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["solve", "2+2?", "--torch-weights", "int8"])
    assert "--torch-weights: invalid choice: 'int8'" in capsys.readouterr().err
