"""How the CLI's client finds the gateway and reads its error answers (pingo/client.py)."""

from __future__ import annotations

import pytest

from pingo.client import default_url, name_matches, problem_lines


@pytest.mark.parametrize(
    "env, url",
    [
        ({}, "http://127.0.0.1:8080"),
        ({"PINGO_PORT": "9123"}, "http://127.0.0.1:9123"),
        ({"PINGO_HOST": "0.0.0.0", "PINGO_PORT": "9123"}, "http://127.0.0.1:9123"),
        ({"PINGO_HOST": "::"}, "http://[::1]:8080"),
        ({"PINGO_HOST": "pingo.internal", "PINGO_PORT": "80"}, "http://pingo.internal:80"),
        ({"PINGO_URL": "https://pingo.example.org", "PINGO_PORT": "9123"}, "https://pingo.example.org"),
    ],
)
def test_the_client_finds_the_gateway_the_environment_names(env: dict, url: str):
    assert default_url(env) == url


def test_a_bad_port_in_the_environment_is_named():
    with pytest.raises(ValueError, match=r"PINGO_PORT must be a port number .* not 'eighty'"):
        default_url({"PINGO_PORT": "eighty"})


def test_problem_bodies_are_printed_whichever_shape_arrives():
    problem = {
        "type": "tag:pingo,2026:problems/invalid-workflow",
        "title": "Invalid workflow",
        "status": 422,
        "detail": "the workflow has 2 violation(s)",
        "violations": [
            {"loc": "actions[0].type", "message": "unknown action type 'teleport'"},
            {"loc": "actions[1]", "message": "command is required for SHELL actions", "actionId": 1},
        ],
    }
    assert problem_lines(problem) == [
        "the workflow has 2 violation(s)",
        "  - actions[0].type: unknown action type 'teleport'",
        "  - actions[1] (action 1): command is required for SHELL actions",
    ]
    bad_state = {"loc": "state", "in": "query", "message": "must be one of PLANNING, RUNNING"}
    query = {"title": "Invalid query", "status": 400, "detail": "2 bad query parameter(s)", "violations": [bad_state]}
    assert problem_lines(query)[1] == "  - query parameter state: must be one of PLANNING, RUNNING"
    assert problem_lines({"title": "Not Found", "status": 404}) == ["Not Found"]
    busy = {"title": "Service Unavailable", "status": 503, "detail": "MongoDB is unreachable", "retryAfter": 1}
    assert problem_lines(busy) == ["MongoDB is unreachable (try again in 1 s)"]
    old = {"error": "limit must be ...; state must be ...", "problems": ["limit must be ...", "state must be ..."]}
    assert problem_lines(old) == [old["error"], "  - limit must be ...", "  - state must be ..."]
    assert problem_lines({"error": "no workflow 'wf-x'"}) == ["no workflow 'wf-x'"]
    assert problem_lines("Bad Gateway") == ["Bad Gateway"]


COMMANDS = [["status", "wf-x"], ["list"], ["kill", "wf-x"], ["datasets"], ["timeline", "wf-x"]]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_gateway_that_cannot_be_reached_is_one_message_and_exit_1(command, capsys, monkeypatch):
    import socket

    from pingo.cli import main

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("PINGO_URL", f"http://127.0.0.1:{port}")
    with pytest.raises(SystemExit) as info:
        main(command)
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith(f"pingo: cannot reach Pingo at http://127.0.0.1:{port}") and "Traceback" not in err


@pytest.mark.parametrize(
    "pattern, name, matches",
    [
        ("sales", "Nightly Sales report", True),
        ("SALES REP", "nightly sales report", True),
        ("nightly*", "nightly sales report", True),
        ("*report", "nightly sales report", True),
        ("report*", "nightly sales report", False),
        ("ni?htly*", "nightly", True),
        ("weekly", "nightly sales report", False),
    ],
)
def test_list_name_is_a_part_of_the_name_or_a_glob_pattern(pattern: str, name: str, matches: bool):
    assert name_matches(pattern, name) is matches
