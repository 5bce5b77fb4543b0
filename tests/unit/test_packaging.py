"""The import rules that keep the installation simple: nothing imports the CLI, the CLI's
parser imports no optional package, and the Hadoop emulator is a program of its own (the
wheel and the image, installed: tests/system/test_packaging.py); the store is reached only
through its own functions, and knows nothing of the engine above it; and the lock file
agrees with pyproject.toml."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGES = [p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]]


# -- the import rules ---------------------------------------------------------------------
def imports_of(path: Path, module: str) -> set[str]:
    """Every module ``path`` imports (anywhere in it), relative imports made absolute."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return found


def project_modules() -> dict[str, set[str]]:
    graph = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
            graph[module] = imports_of(path, module)
    return graph


def test_import_rules() -> None:
    graph = project_modules()
    assert "pingo.cli" in graph and "hadoop_emulator.cli" in graph
    tops = {m: {i.split(".")[0] for i in found} for m, found in graph.items()}
    # The command line is a leaf: no module imports it.
    assert [m for m, found in graph.items() if "pingo.cli" in found] == []
    # The emulator is a program of its own: it imports nothing of Pingo, and nothing of Pingo
    # imports it (`pingo emulate-hadoop` names it only when it runs).
    pingo = {"pingo", "shared", "services", "evaluation"}
    emulator = {m for m in tops if m.split(".")[0] == "hadoop_emulator"}
    assert {m: tops[m] & pingo for m in emulator if tops[m] & pingo} == {}
    assert [m for m, t in tops.items() if "hadoop_emulator" in t and m not in emulator] == []
    # The services and their shared core know nothing of the clients and tools around them.
    assert {m: t & {"pingo", "evaluation"} for m, t in tops.items() if m.split(".")[0] in ("shared", "services")} == {
        m: set() for m in tops if m.split(".")[0] in ("shared", "services")
    }


# What a collection answers to: only shared/store/ calls these (docs/architecture.md,
# "MongoDB is the source of truth").
COLLECTION_CALLS = {
    "find", "find_one", "find_one_and_update", "update_one", "update_many", "insert_one", "insert_many",
    "delete_one", "delete_many", "replace_one", "aggregate", "count_documents", "bulk_write", "db",
}  # fmt: skip
# Left to move behind the store's front door (issue 25): the submission's read of its
# definition, and the guarded writer, which hands ``transition`` its collection.
NOT_YET_BEHIND_THE_DOOR = {"services.workflow_manager.submission", "shared.lifecycle.moves"}


COLLECTIONS = {"actions", "datasets", "workflows", "locks", "db"}


def collection_calls(path: Path) -> set[str]:
    """The collections ``path`` takes from a store (``ctx.store.locks``), and the collection
    methods it calls on anything but a module's name (``acts.get`` is the store's
    function; ``definitions(store).find_one`` queries a collection)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Attribute):
            continue
        base = node.value
        if node.attr in COLLECTION_CALLS and not isinstance(base, ast.Name):
            found.add(node.attr)
        elif node.attr in COLLECTIONS and "store" in (getattr(base, "attr", None), getattr(base, "id", None)):
            found.add(f"store.{node.attr}")
    return found


def test_the_store_is_reached_only_through_its_front_door() -> None:
    graph = project_modules()
    # The store is the bottom layer: it knows nothing of how a workflow lives or is planned.
    # (shared.store.actions still builds an action's document from the planner's PlannedAction.)
    engine = ("shared.lifecycle", "shared.planning")
    assert {
        m: {i for i in found if i.startswith(engine)}
        for m, found in graph.items()
        if m.startswith("shared.store") and any(i.startswith(engine) for i in found) and m != "shared.store.actions"
    } == {}
    assert {i for i in graph["shared.store.actions"] if i.startswith("shared.lifecycle")} == set()
    # Services and the engine call the store's named functions, never a collection.
    querying = set()
    for package in ("services", "shared/lifecycle"):
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            if collection_calls(path):
                querying.add(module)
    assert querying <= NOT_YET_BEHIND_THE_DOOR, querying - NOT_YET_BEHIND_THE_DOOR


def test_only_pingo_evaluate_needs_the_evaluation_extra() -> None:
    """numpy and matplotlib (``pingo[evaluation]``) are imported by the evaluation modules
    alone, and ``pingo whatif``, which the service image keeps, imports neither."""
    extra = {"numpy", "matplotlib"}
    users = {m for m, found in project_modules().items() if {i.split(".")[0] for i in found} & extra}
    assert users and all(m.startswith("evaluation.") for m in users), users
    probe = "import sys, evaluation.cli, evaluation.whatif; print(sorted({'numpy', 'matplotlib'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_parser_imports_no_service_and_no_optional_package() -> None:
    probe = (
        "import sys, pingo.cli; pingo.cli.parser(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('evaluation', 'hadoop_emulator', 'shared') "
        "or m.startswith('services.') or m in ('pingo.dev', 'pingo.demo')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_serve_offers_every_service() -> None:
    from pingo.cli import service_names
    from pingo.dev import SERVICES

    assert service_names() == sorted(SERVICES)


# -- the lock -----------------------------------------------------------------------------
def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pin(line: str) -> tuple[str, str]:
    """``name==version`` (a comment after it allowed) -> (canonical name, version)."""
    m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^\s;#]+)\s*(#.*)?", line.strip())
    assert m, f"not an exact pin: {line!r}"
    return canonical(m[1]), m[2]


def test_constraints_pin_every_dependency_at_the_version_pyproject_asks_for() -> None:
    """constraints.txt (scripts/lock) pins the whole installed set; when a dependency in
    pyproject.toml changes without running scripts/lock, installs would fail or float."""
    lines = [x for x in (ROOT / "constraints.txt").read_text().splitlines() if x and not x.startswith("#")]
    locked = dict(map(pin, lines))
    assert len(locked) == len(lines), "constraints.txt names a package twice"
    project = PYPROJECT["project"]
    wanted = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    stale = {name: (version, locked.get(name)) for name, version in map(pin, wanted) if locked.get(name) != version}
    assert stale == {}, f"pyproject.toml wants, constraints.txt has: {stale}; run scripts/lock"
