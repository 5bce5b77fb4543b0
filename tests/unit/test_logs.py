"""The two log formats (shared/logs.py): text for people, unchanged but for the ids of a
line about an action; json, one object per line with the ids as fields."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest

from shared import logs


@pytest.fixture
def captured() -> Iterator[tuple[logging.Logger, io.StringIO, logging.Handler]]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(logs.Ids("tester"))
    logger = logging.getLogger("pingo.test.logs")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield logger, out, handler
    logger.removeHandler(handler)


def test_text_is_the_familiar_line_with_the_ids_after_the_message(captured) -> None:
    logger, out, handler = captured
    handler.setFormatter(logs.formatter("text"))
    logger.info("plain %d", 1)
    with logs.about("wf-1", "wf-1.2"):
        logger.warning("about an action")
    with logs.about("wf-1"):
        logger.info("about a workflow")
    plain, action, workflow = out.getvalue().splitlines()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO pingo\.test\.logs: plain 1", plain)
    assert action.endswith("WARNING pingo.test.logs: about an action [workflow=wf-1 action=wf-1.2]")
    assert workflow.endswith("INFO pingo.test.logs: about a workflow [workflow=wf-1]")


def test_json_lines_carry_the_ids_the_service_and_the_exception(captured) -> None:
    logger, out, handler = captured
    handler.setFormatter(logs.formatter("json"))
    with logs.serving("action_manager"), logs.about("wf-1"), logs.about(action_id="wf-1.2"):
        try:
            raise ValueError("bad")
        except ValueError:
            logger.exception("failed")
    logger.info("after")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["service"] == "action_manager" and first["level"] == "ERROR" and first["logger"] == logger.name
    assert (first["workflow_id"], first["action_id"]) == ("wf-1", "wf-1.2")
    assert "ValueError: bad" in first["exception"] and first["message"] == "failed"
    assert first["timestamp"].endswith("+00:00")
    # Leaving the blocks unbinds: the next line is about nothing, from the process's service.
    assert (second["service"], second["workflow_id"], second["action_id"]) == ("tester", None, None)


def test_a_delivery_forgets_the_publishers_ids(captured) -> None:
    logger, out, handler = captured
    handler.setFormatter(logs.formatter("json"))
    with logs.about("wf-pub", "wf-pub.1"), logs.delivery("decision", "wf-2", None):
        logger.info("handling")
    line = json.loads(out.getvalue())
    assert (line["service"], line["workflow_id"], line["action_id"]) == ("decision", "wf-2", None)
