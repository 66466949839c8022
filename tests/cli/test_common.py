"""The shared flags' conversion into settings (cli/common.py): --torch-weights is a typed setting
that reaches the torch backend in its Placement, and changes nothing of the process."""

from __future__ import annotations

import pytest

from edgereason.backends.torch import int4_choice
from edgereason.cli.common import model_settings
from edgereason.cli.main import build_parser
from edgereason.session.gpu import placement


@pytest.mark.parametrize("command", ["solve", "bench", "chat"])
def test_torch_weights_is_a_setting_the_placement_carries(command, monkeypatch):
    monkeypatch.setenv(int4_choice.SWITCH, "")  # unset, and put back after the test
    problem = ["2+2?"] if command == "solve" else []
    parser = build_parser()
    unset = model_settings(parser.parse_args([command, *problem]))
    assert unset.torch_weights is None and placement(unset).torch_weights is None
    asked = model_settings(parser.parse_args([command, *problem, "--torch-weights", "int4"]))
    assert placement(asked).torch_weights == "int4"
    assert int4_choice.weights_kind("cuda", placement(asked).torch_weights) == "int4"
    assert int4_choice.os.environ[int4_choice.SWITCH] == ""  # the process's variable untouched


def test_another_kind_of_weights_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["solve", "2+2?", "--torch-weights", "int8"])
    assert "--torch-weights: invalid choice: 'int8'" in capsys.readouterr().err
