"""The one claim policy (shared/lifecycle/claims.py): what a dataset document means for
an action, as submission, the dry run and re-planning all ask it."""

from __future__ import annotations

import pytest

from shared.lifecycle.claims import COLLISION, Claim, meaning, to_check

LINEAGE = {"type": "shell", "parents": []}


def dataset(state: str, producers: list[str] | None = None, lineage: dict | None = None) -> dict:
    return {"_id": "h", "state": state, "producers": producers or [], "lineage": lineage or LINEAGE, "path": "/p"}


@pytest.mark.parametrize(
    ("state", "producers", "claim"),
    [
        ("STORED", [], Claim.REUSE),
        ("LEAF", [], Claim.REUSE),
        ("STORED_TO_DELETE", [], Claim.REVIVE),
        ("PROCESSING", [], Claim.REVIVE),
        ("TO_STORE", ["wf-a.1"], Claim.FOLLOW),
        ("TO_LEAF", ["wf-a.1"], Claim.FOLLOW),
        ("TO_STORE", [], Claim.COMPUTE),  # no producer left to follow
        ("DELETING", [], Claim.COMPUTE),
        ("DELETED", [], Claim.COMPUTE),
        ("LOST", [], Claim.LOST),
    ],
)
def test_each_state_means_one_thing_for_an_action(state: str, producers: list[str], claim: Claim) -> None:
    found = meaning(dataset(state, producers), LINEAGE)
    assert found.claim is claim
    assert found.stored == (claim in (Claim.REUSE, Claim.REVIVE))
    if not found.stored:
        assert found.why == f"its dataset exists but is {state}"


def test_no_dataset_is_computed() -> None:
    assert meaning(None, LINEAGE).claim is Claim.COMPUTE


def test_another_lineage_under_the_same_hash_is_never_reused_nor_followed() -> None:
    other = {"type": "spark", "parents": []}
    for state, producers in (("STORED", []), ("TO_STORE", ["wf-a.1"])):
        found = meaning(dataset(state, producers, lineage=other), LINEAGE)
        assert (found.claim, found.why, found.collision) == (Claim.COMPUTE, COLLISION, True)
    # Re-planning reads the dataset's own lineage: no collision to find.
    assert meaning(dataset("STORED", lineage=other)).claim is Claim.REUSE


def test_only_a_stored_dataset_not_being_deleted_has_its_files_checked() -> None:
    assert [s for s in ("STORED", "LEAF", "STORED_TO_DELETE", "PROCESSING", "LOST") if to_check(dataset(s))] == [
        "STORED", "LEAF", "STORED_TO_DELETE",
    ]  # fmt: skip
