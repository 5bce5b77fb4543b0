"""The terminal's drawing of a workflow's DAG by levels (pingo/display.py)."""

from __future__ import annotations

from pingo.display import levels


def test_levels_group_actions_by_their_longest_path_from_a_root_in_the_given_order():
    actions = [
        {"localId": 10, "parents": []},
        {"localId": 12, "parents": [10]},
        {"localId": 11, "parents": [10]},
        {"localId": 13, "parents": [11, 12]},
        {"localId": 14, "parents": [13, 10]},  # an edge skipping a level
        {"localId": 15, "parents": [13]},
    ]
    assert [[a["localId"] for a in level] for level in levels(actions)] == [[10], [12, 11], [13], [14, 15]]


def test_a_chain_longer_than_the_recursion_limit_is_drawn():
    chain = [{"localId": i, "parents": [i - 1] if i else []} for i in range(3000)]
    drawn = levels(chain)
    assert len(drawn) == 3000 and [level[0]["localId"] for level in drawn[:3]] == [0, 1, 2]
