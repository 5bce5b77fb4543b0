"""The settings tables operators read (README, deploy/README.md) name every setting of
``shared/config.py`` with its own description, and nothing that is gone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shared.config import Settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("doc", ["README.md", "deploy/README.md"])
def test_settings_tables_match_the_settings(doc: str) -> None:
    rows = {m[0]: m[1] for m in re.findall(r"^\| `(PINGO_[A-Z_]+)` \|(.*)$", (ROOT / doc).read_text(), re.M)}
    wanted = {f"PINGO_{name.upper()}": field.description for name, field in Settings.model_fields.items()}
    assert sorted(rows) == sorted(wanted), f"{doc}: settings table out of step with shared/config.py"
    stale = [var for var, description in wanted.items() if description not in rows[var]]
    assert not stale, f"{doc}: these rows do not carry the description from shared/config.py: {stale}"
