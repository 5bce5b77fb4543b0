"""Webhooks in the language and the settings (docs/webhooks.md): a workflow's webhooks are
checked for their form offline, enter no lineage hash, never reach a log line whole, and
the installation's need a secret that can sign."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from pingo.builder import Workflow
from shared.config import Settings
from shared.hashing import workflow_hashes
from shared.webhooks.delivery import next_wait
from shared.webhooks.urls import host_allowed, redacted
from shared.workflow_spec import parse_workflow

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def body(**top: Any) -> dict[str, Any]:
    return {"name": "w", "actions": [{"id": 1, "name": "a", "type": "shell", "command": ["true"]}], **top}


def test_webhooks_are_checked_for_their_form_and_enter_no_lineage_hash() -> None:
    plain, _ = parse_workflow(body())
    told, problems = parse_workflow(body(webhooks=["https://hooks.example.org/pingo?token=x"]))
    assert problems == [] and plain is not None and told is not None
    assert told.webhooks == ["https://hooks.example.org/pingo?token=x"]
    assert workflow_hashes(told) == workflow_hashes(plain)
    _, problems = parse_workflow(body(webhooks=["https://u:p@example.org/", 3, "x" * 3000, "https://a/", "https://a/"]))
    assert [(v.loc, v.message) for v in problems] == [
        ("webhooks[0]", "https://example.org/…: a webhook URL carries no user or password (deliveries are signed "
                        "instead)"),
        ("webhooks[1]", "a webhook is a URL, in a string"),
        ("webhooks[2]", "a webhook URL is at most 2048 characters"),
        ("webhooks", "a webhook URL is given twice"),
    ]  # fmt: skip
    _, problems = parse_workflow(body(webhooks="https://a/"))
    assert [(v.loc, v.message) for v in problems] == [("webhooks", "webhooks must be a list of at most 5 URLs")]


def test_the_builder_names_webhooks() -> None:
    workflow = Workflow("w", webhooks=["https://hooks.example.org/pingo"])
    workflow.shell("a", ["true"], folder="examples/jobs")
    assert workflow.to_json()["webhooks"] == ["https://hooks.example.org/pingo"]
    assert workflow.validate() == []


def test_hosts_the_operator_listed_and_what_logs_say_of_a_url() -> None:
    listed = ["hooks.example.org", "ci.example.org:8443", ".corp.example"]
    assert host_allowed("https://hooks.example.org/x", listed)
    assert host_allowed("https://ci.example.org:8443/x", listed)
    assert not host_allowed("https://ci.example.org/x", listed)
    assert host_allowed("http://a.b.corp.example/x", listed) and host_allowed("http://corp.example/", listed)
    assert not host_allowed("http://evilcorp.example/", listed) and not host_allowed("http://127.0.0.1/", listed)
    assert redacted("https://hooks.example.org:8443/T0KEN/abc?key=secret") == "https://hooks.example.org:8443/…"


def test_attempts_wait_longer_each_time_up_to_an_hour() -> None:
    assert [next_wait(5.0, n) for n in (1, 2, 3)] == [5.0, 10.0, 20.0]
    assert next_wait(5.0, 30) == 3600.0


def test_webhooks_need_a_secret_that_can_sign() -> None:
    with pytest.raises(ValidationError, match="need PINGO_WEBHOOK_SECRET"):
        Settings(webhooks=["https://hooks.example.org/"])
    with pytest.raises(ValidationError, match="PINGO_WEBHOOK_SECRET: 3 bytes: at least 24"):
        Settings(webhook_hosts=["hooks.example.org"], webhook_secret="whsec_YWJj")
    with pytest.raises(ValidationError, match="PINGO_WEBHOOKS: ftp://x/…: a webhook is an http"):
        Settings(webhooks=["ftp://x/secret-path"], webhook_secret=SECRET)
    settings = Settings(webhooks="https://a.example/, https://b.example/", webhook_secret=SECRET)
    assert settings.webhooks == ["https://a.example/", "https://b.example/"]
    assert SECRET not in repr(settings)
