"""Workflow bodies for the validation tests, and reading the violations they get."""

from __future__ import annotations

from typing import Any

from tests.support.workflows import shell_action


def shell(aid: Any, parents: list = (), **extra: Any) -> dict[str, Any]:
    return shell_action(aid, f"v-{aid}", parents, **extra)


def command_line(aid: Any, parents: list = (), **extra: Any) -> dict[str, Any]:
    return {
        "id": aid,
        "name": f"cl-{aid}",
        "type": "COMMAND_LINE",
        "actionFolder": "examples/jobs",
        "mainClassName": "org.example.Job",
        "parentActions": [{"id": p} for p in parents],
        "additionalInput": [{"key": "n", "value": str(aid)}],
        **extra,
    }


def map_reduce(aid: Any, parents: list = (), **extra: Any) -> dict[str, Any]:
    """A Hadoop streaming word count (examples/wordcount)."""
    return {
        "id": aid,
        "name": f"mr-{aid}",
        "type": "MAP_REDUCE",
        "actionFolder": "examples/wordcount",
        "mapper": ["python3", "mapper.py"],
        "reducer": ["python3", "reducer.py"],
        "configurationParameters": [{"key": "mapreduce.job.reduces", "value": "2"}],
        "parentActions": [{"id": p} for p in parents],
        **extra,
    }


def spark(aid: Any, parents: list = (), **extra: Any) -> dict[str, Any]:
    """A PySpark application (examples/spark/count)."""
    return {
        "id": aid,
        "name": f"spark-{aid}",
        "type": "SPARK",
        "actionFolder": "examples/spark/count",
        "application": "count.py",
        "parentActions": [{"id": p} for p in parents],
        **extra,
    }


def workflow(*actions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": "validation", "actions": list(actions), **extra}


def without(action: dict[str, Any], *fields: str) -> dict[str, Any]:
    return {k: v for k, v in action.items() if k not in fields}


def one(violations: list[dict[str, Any]], loc: str, **expected: Any) -> dict[str, Any]:
    """The single violation at ``loc``; ``expected`` fields must match it."""
    hits = [v for v in violations if v["loc"] == loc]
    assert len(hits) == 1, f"expected one violation at {loc!r}, got {violations}"
    v = hits[0]
    for key, value in expected.items():
        assert v.get(key) == value, f"{key}: {v.get(key)!r} != {value!r} in {v}"
    return v


def says(v: dict[str, Any], *words: str) -> None:
    text = v["message"].lower()
    for w in words:
        assert w.lower() in text, f"{w!r} not in message {v['message']!r}"
