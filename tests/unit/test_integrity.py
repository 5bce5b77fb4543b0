"""What a committed dataset is made of, on the local filesystem (``LocalStorage.integrity``),
and the one check built on it (``shared.storage.verification``): docs/planning.md, "Lost
datasets"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shared.storage.base import Integrity
from shared.storage.local import LocalStorage, seal
from shared.storage.verification import verify


def dataset(root: Path) -> Path:
    path = root / "d"
    (path / "sub").mkdir(parents=True)
    (path / "part-00000").write_bytes(b"a" * 1000)
    (path / "sub" / "part-00001").write_bytes(b"hello")
    (path / "_SUCCESS").write_bytes(b"")
    return path


@pytest.fixture
def storage(tmp_path: Path) -> LocalStorage:
    return LocalStorage(tmp_path / "managed")


async def test_size_files_and_a_stable_checksum(storage: LocalStorage, tmp_path: Path) -> None:
    path = dataset(tmp_path)
    first = await storage.integrity(str(path), checksum=True)
    assert first is not None and (first.size, first.files) == (1005, 3)
    assert first.checksum is not None and len(first.checksum) == 64
    seal(path)  # as a commit leaves it: read-only, still readable
    assert await storage.integrity(str(path), checksum=True) == first
    assert await storage.integrity(str(path), checksum=False) == Integrity(1005, 3, None)
    # The same files elsewhere: the checksum covers relative paths and contents only.
    assert (await storage.integrity(str(dataset(tmp_path / "copy")), checksum=True)) == first
    # A folder of regular files has the digest of an action folder's fingerprint.
    assert first.checksum == await storage.fingerprint(str(path))


async def test_one_changed_byte_changes_the_checksum_not_the_size(storage: LocalStorage, tmp_path: Path) -> None:
    path = dataset(tmp_path)
    before = await storage.integrity(str(path), checksum=True)
    (path / "part-00000").write_bytes(b"a" * 999 + b"b")
    after = await storage.integrity(str(path), checksum=True)
    assert after is not None and before is not None
    assert (after.size, after.files) == (before.size, before.files) and after.checksum != before.checksum


async def test_a_renamed_or_added_file_changes_the_checksum(storage: LocalStorage, tmp_path: Path) -> None:
    path = dataset(tmp_path)
    before = await storage.integrity(str(path), checksum=True)
    (path / "sub" / "part-00001").rename(path / "sub" / "part-00002")
    renamed = await storage.integrity(str(path), checksum=True)
    (path / "extra").write_bytes(b"")
    added = await storage.integrity(str(path), checksum=True)
    assert len({before.checksum, renamed.checksum, added.checksum}) == 3
    assert added.files == before.files + 1 and added.size == before.size


async def test_a_single_file_and_a_missing_path(storage: LocalStorage, tmp_path: Path) -> None:
    (tmp_path / "one").write_bytes(b"xyz")
    one = await storage.integrity(str(tmp_path / "one"), checksum=True)
    assert one is not None and (one.size, one.files) == (3, 1)
    assert await storage.integrity(str(tmp_path / "nothing"), checksum=True) is None
    assert await storage.integrity(str(tmp_path / "nothing"), checksum=False) is None


async def test_a_symbolic_link_counts_by_its_target_never_followed(storage: LocalStorage, tmp_path: Path) -> None:
    path = dataset(tmp_path)
    (tmp_path / "outside").write_bytes(b"x" * 50)
    (path / "link").symlink_to(tmp_path / "outside")
    before = await storage.integrity(str(path), checksum=True)
    assert (before.size, before.files) == (1005, 4)
    (tmp_path / "outside").write_bytes(b"y" * 50)
    assert await storage.integrity(str(path), checksum=True) == before
    (path / "link").unlink()
    (path / "link").symlink_to(tmp_path / "elsewhere")
    assert (await storage.integrity(str(path), checksum=True)).checksum != before.checksum


async def recorded(storage: LocalStorage, path: Path, **override: Any) -> dict[str, Any]:
    found = await storage.integrity(str(path), checksum=True)
    return {"path": str(path), "size": found.size, "files": found.files, "checksum": found.checksum, **override}


async def test_verification_levels(storage: LocalStorage, tmp_path: Path) -> None:
    path = dataset(tmp_path)
    doc = await recorded(storage, path)
    for level in ("none", "exists", "size", "checksum"):
        assert (await verify(storage, doc, level)).ok, level

    (path / "part-00000").write_bytes(b"a" * 999 + b"b")  # same size, other content
    assert (await verify(storage, doc, "size")).ok  # the trade-off: size cannot see it
    changed = await verify(storage, doc, "checksum")
    assert not changed.ok and changed.problem == "checksum" and changed.found.size == doc["size"]
    assert changed.lost_fields()["found_checksum"] == changed.found.checksum
    # Committed before checksums were recorded: checked by size.
    assert (await verify(storage, {**doc, "checksum": None, "files": None}, "checksum")).ok

    (path / "sub" / "part-00001").write_bytes(b"hello, world")
    grown = await verify(storage, doc, "size")
    assert not grown.ok and grown.problem == "size" and grown.found.size == doc["size"] + 7
    assert "recorded 1005 B" in grown.describe(doc)

    missing = {**doc, "path": str(tmp_path / "gone")}
    assert (await verify(storage, missing, "none")).ok  # the catalogue is trusted
    for level in ("exists", "size", "checksum"):
        verdict = await verify(storage, missing, level)
        assert not verdict.ok and verdict.problem == "missing" and verdict.found is None, level
        assert verdict.lost_fields()["lost_reason"] == "missing"


async def test_an_extra_empty_file_is_a_change_of_file_count(storage: LocalStorage, tmp_path: Path) -> None:
    path = dataset(tmp_path)
    doc = await recorded(storage, path)
    (path / "sub" / "_SUCCESS").write_bytes(b"")
    assert (await verify(storage, doc, "size")).ok
    verdict = await verify(storage, doc, "checksum")
    assert not verdict.ok and verdict.problem == "files"


async def test_a_commit_checked_is_the_commit_then_what_the_output_is_made_of(
    storage: LocalStorage, tmp_path: Path
) -> None:
    final = Path(storage.root) / "out"
    first = dataset(Path(storage.attempt_path(str(final), "wf.a", 1)).parent / "one")
    won, found = await storage.commit_checked(str(first), str(final), checksum=True)
    assert won and found == await storage.integrity(str(final), checksum=True)
    assert (found.size, found.files) == (1005, 3) and found.checksum is not None
    assert not first.exists() and not (final / "part-00000").stat().st_mode & 0o222  # moved in, sealed
    # A later commit loses (first wins) and is discarded; what is checked is the output in place.
    late = dataset(tmp_path / "late")
    (late / "part-00000").write_bytes(b"other")
    assert await storage.commit_checked(str(late), str(final), checksum=True) == (False, found)
    assert not late.exists()
    # Without a checksum asked for, none is taken; with no output at all, nothing is checked.
    assert await storage.commit_checked(str(first), str(final)) == (True, Integrity(1005, 3, None))
    with pytest.raises(FileNotFoundError):
        await storage.commit_checked(str(tmp_path / "missing"), str(tmp_path / "nowhere"), checksum=True)
