"""The settings tables operators read (README, deploy/README.md) name every setting of
``shared/config.py`` with its own description, and nothing that is gone; sizes in settings
take a unit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from shared.config import Settings
from shared.sizes import human

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("doc", ["README.md", "deploy/README.md"])
def test_settings_tables_match_the_settings(doc: str) -> None:
    rows = {m[0]: m[1] for m in re.findall(r"^\| `(PINGO_[A-Z_]+)` \|(.*)$", (ROOT / doc).read_text(), re.M)}
    wanted = {f"PINGO_{name.upper()}": field.description for name, field in Settings.model_fields.items()}
    assert sorted(rows) == sorted(wanted), f"{doc}: settings table out of step with shared/config.py"
    stale = [var for var, description in wanted.items() if description not in rows[var]]
    assert not stale, f"{doc}: these rows do not carry the description from shared/config.py: {stale}"


@pytest.mark.parametrize(
    "given, capacity",
    [("10GiB", 10 * 1024**3), ("500GB", 500 * 1000**3), ("1.5 gib", int(1.5 * 1024**3)), ("12345", 12345)],
)
def test_sizes_in_settings_take_a_unit_and_plain_bytes(
    monkeypatch: pytest.MonkeyPatch, given: str, capacity: int
) -> None:
    monkeypatch.setenv("PINGO_CAPACITY_BYTES", given)
    monkeypatch.setenv("PINGO_MAX_BODY_BYTES", "2MiB")
    settings = Settings()
    assert settings.capacity_bytes == capacity and type(settings.capacity_bytes) is int
    assert settings.max_body_bytes == 2 * 1024**2


@pytest.mark.parametrize("given", ["lots", "-1GiB", "0", "10 XB"])
def test_a_size_setting_that_cannot_be_read_says_which_and_why(monkeypatch: pytest.MonkeyPatch, given: str) -> None:
    monkeypatch.setenv("PINGO_CAPACITY_BYTES", given)
    with pytest.raises(ValidationError) as raised:
        Settings()
    text = str(raised.value)
    assert "capacity_bytes" in text and repr(given) in text and ("cannot read" in text or "at least 1 byte" in text)


def test_sizes_are_shown_in_binary_units() -> None:
    assert [human(n) for n in (None, 0, 512, 1536, 10 * 1024**3)] == ["-", "0 B", "512 B", "1.5 KiB", "10.0 GiB"]


def test_the_deployment_column_is_what_the_configmap_sets() -> None:
    """deploy/README.md's "this deployment" column: the ConfigMap's value, or "not set"
    (or the Secret) where the ConfigMap leaves the code's default."""
    configmap = (ROOT / "deploy/kubernetes/configmap.yaml").read_text()
    data = {k: v.strip().strip("'\"") for k, v in re.findall(r"^  (PINGO_[A-Z_]+): (.*)$", configmap, re.M)}
    rows = re.findall(r"^\| `(PINGO_[A-Z_]+)` \| [^|]* \| ([^|]*) \|", (ROOT / "deploy/README.md").read_text(), re.M)
    wrong = []
    for var, shown in rows:
        shown = shown.strip()
        if shown == "not set" or shown.startswith("Secret"):
            if var in data:
                wrong.append((var, shown, data[var]))
        elif shown.strip("`") != data.get(var):
            wrong.append((var, shown, data.get(var)))
    assert rows and not wrong, f"deploy/README.md's deployment column against configmap.yaml: {wrong}"
