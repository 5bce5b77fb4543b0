"""The import rules that keep the installation simple: nothing imports the CLI, the CLI's
parser imports no optional package, and the Hadoop emulator is a program of its own (the
wheel and the image, installed: tests/system/test_packaging.py); the store is reached only
through its own functions, and knows nothing of the engine above it; the lock file agrees
with pyproject.toml; and a service whose top-level names another package takes stops at
once, saying so."""

from __future__ import annotations

import ast
import os
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


# The store's front door (docs/architecture.md, "The life of a workflow"): the store is
# the bottom layer; the engine (shared/lifecycle/) and the services named here ask it by
# named functions, never a collection, and use none of its private helpers.
# Every service module and every phase; the guarded writer (shared/lifecycle/moves.py)
# alone hands the store's ``transition`` its collection.
FRONT_DOOR = sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    for package in ("services", "shared/lifecycle")
    for path in (ROOT / package).rglob("*.py")
    if path.name != "__main__.py" and path.relative_to(ROOT) != Path("shared/lifecycle/moves.py")
)
COLLECTIONS = {"datasets", "actions", "workflows", "locks", "db"}
QUERIES = {
    "find", "find_one", "find_one_and_update", "update_one", "update_many", "insert_one", "insert_many",
    "delete_one", "delete_many", "aggregate", "count_documents", "bulk_write", "replace_one",
}  # fmt: skip


def module_path(module: str) -> Path:
    path = ROOT.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def store_aliases(tree: ast.AST) -> set[str]:
    """The names a module binds to modules of ``shared.store``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("shared.store"):
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.asname or a.name for a in node.names if a.name.startswith("shared.store"))
    return names


def store_reaches(module: str) -> list[str]:
    """Where ``module`` queries a collection itself or calls a private store helper."""
    tree = ast.parse(module_path(module).read_text())
    aliases = store_aliases(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        receiver = node.value
        owner = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", None)
        if owner in aliases and node.attr.startswith("_"):
            found.append(f"{module}:{node.lineno} {owner}.{node.attr} (private)")
        elif owner == "store" and node.attr in COLLECTIONS:
            found.append(f"{module}:{node.lineno} store.{node.attr}")
        elif node.attr in QUERIES and owner not in aliases:
            found.append(f"{module}:{node.lineno} .{node.attr}()")
    return found


def test_the_store_is_the_bottom_layer_and_has_one_front_door() -> None:
    graph = project_modules()
    store = [m for m in graph if m == "shared.store" or m.startswith("shared.store.")]
    above = {m: {i for i in graph[m] if i == "shared.planning" or i.startswith("shared.lifecycle")} for m in store}
    assert {m: found for m, found in above.items() if found} == {}
    assert [reach for m in FRONT_DOOR for reach in store_reaches(m)] == []


def test_the_engine_takes_its_collaborators_not_the_runtime() -> None:
    """Engine code is handed a store, a storage, a mover and settings, never the whole
    runtime context; and the phases of a workflow's life import no service."""
    graph = project_modules()
    engine = {m: found for m, found in graph.items() if m.startswith("shared.lifecycle")}
    assert {m: {i for i in found if i.startswith(("shared.runtime", "services"))} for m, found in engine.items()} == {
        m: set() for m in engine
    }


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


# -- the installed names (docs/operations.md, "Installed package names") --------------------
def run_service_help(cwd: Path, *path: Path) -> subprocess.CompletedProcess:
    """``python -m services.decision --help`` from ``cwd``, with Pingo's source (and
    ``path``) on the Python path, as a service is started."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, (ROOT, *path)))}
    return subprocess.run(
        [sys.executable, "-m", "services.decision", "--help"], cwd=cwd, env=env, capture_output=True, text=True
    )


def test_a_service_starts_where_no_other_package_takes_pingos_names(tmp_path: Path) -> None:
    out = run_service_help(tmp_path)
    assert out.returncode == 0 and out.stdout.startswith("usage: python -m services.decision"), out.stderr


def test_a_package_of_the_users_named_shared_stops_a_service_at_once_saying_so(tmp_path: Path) -> None:
    # python -m puts the working directory first on the path: the user's project's own `shared`.
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "__init__.py").write_text("")
    out = run_service_help(tmp_path)
    assert out.returncode == 1, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: pingo: the package 'shared'") and str(tmp_path / "shared") in last, last
    assert "Run from another directory" in last and "Installed package names" in last


def test_another_distribution_installing_shared_stops_a_service_at_once_saying_so(tmp_path: Path) -> None:
    # What pip leaves of a distribution that installs a top-level `shared` of its own.
    site = tmp_path / "site"
    info = site / "other_tool-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: other-tool\nVersion: 1.0\n")
    (info / "RECORD").write_text("shared/__init__.py,,\nshared/util.py,,\nother_tool-1.0.dist-info/RECORD,,\n")
    out = run_service_help(tmp_path, site)
    assert out.returncode == 1, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert "other-tool installs shared" in last and "virtual environment of its own" in last, last
