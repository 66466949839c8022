"""What a finished search shows: under a vote, the path shown is the best one that reaches the voted
answer."""

from __future__ import annotations

from edgereason.cli.solve import print_text
from edgereason.engine.result import FinalPath, RequestMetrics, SearchResult, vote


def path(answer: str | None, score: float, node_id: int, potential: int = 1) -> FinalPath:
    return FinalPath([(f"so \\boxed{{{answer}}}", score)], score, answer, node_id, potential)


# best first, as build_result ranks them: one path of 26 outscores each of the three of 18
PATHS = [
    path("26", 0.54, 1),
    path("18", 0.53, 2),
    path("18.0", 0.44, 3),
    path(None, 0.30, 4),
    path("18", 0.2, 5, 2),
]


def test_the_answer_path_is_the_best_ranked_one_that_reaches_the_vote() -> None:
    result = SearchResult("r", "q", vote(PATHS), PATHS, [], RequestMetrics())
    assert result.answer == "18"
    assert result.answer_path().node_id == 2
    # "18.0" is 18; the last path stands for two deduplicated copies
    assert result.answer_support() == (4, 6)


def test_without_an_answer_the_best_path_is_shown() -> None:
    result = SearchResult("r", "q", None, PATHS[3:4], [], RequestMetrics())
    assert result.answer_path().node_id == 4 and result.answer_support() == (0, 1)
    assert SearchResult("r", "q", None, [], [], RequestMetrics()).answer_path() is None
    assert result.best_path_title(result.answer_path()) == "Best path (score 0.300)"


def test_solve_prints_the_path_to_its_answer(capsys) -> None:
    print_text(SearchResult("r", "q", "18", PATHS, [], RequestMetrics()), show_tree=False)
    out = capsys.readouterr().out
    assert "Answer: 18" in out and "score 0.530; 4 of 6 paths reach it" in out
    assert "\\boxed{26}" not in out
