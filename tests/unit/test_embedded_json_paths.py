"""The embedded store's JSON paths remembered (``shared/store/embedded_json_paths.py``):
the same path for every field name as neosqlite's, in every module that uses it."""

from __future__ import annotations

import sys

import pytest
from neosqlite.collection import json_path_utils
from neosqlite.collection.query_helper import _sql_updates

from shared.store.embedded_json_paths import remember_json_paths

FIELDS = ["_id", "state", "a.b", "a.b[0]", "orders.items[2].name", "held_stats.1795829640.actions", "", "x[1][2]"]


def test_a_remembered_path_is_neosqlites(monkeypatch: pytest.MonkeyPatch) -> None:
    parse = json_path_utils.parse_json_path
    users = [
        m
        for n, m in list(sys.modules.items())
        if n.startswith("neosqlite") and getattr(m, "parse_json_path", None) is parse
    ]
    for module in users:  # restored after the test: the change is the server process's
        monkeypatch.setattr(module, "parse_json_path", parse)
    expected = [parse(field) for field in FIELDS]
    remember_json_paths()
    assert _sql_updates.parse_json_path is json_path_utils.parse_json_path is not parse
    remembered = json_path_utils.parse_json_path
    assert [remembered(field) for field in FIELDS * 2] == expected * 2
    assert remembered.cache_info().hits >= len(FIELDS)  # type: ignore[attr-defined]
