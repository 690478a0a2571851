"""The engine's rooms (references/architecture.md), checked from the source: folder sizes, imports
that point one way with no cycle (lazy imports included), Ray only in the pool, the optional parts
only at the command edge, no private helper used across rooms."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "autoresearch"

# Which rooms each room may import ("" is the package's top level). Any import not listed here,
# module-level or inside a function, fails the test: the architecture doc and this table change together.
BELOW = {"": set(), "store": {""}, "decision": {"", "store"}, "isolation": {"", "store"},
         "pipeline": {"", "store", "decision", "isolation"}}
BELOW["views"] = BELOW["pipeline"] | {"pipeline"}
for _edge in ("night", "pool", "setup"):
    BELOW[_edge] = BELOW["views"] | {"views"}
EDGE = {("", "cli")}      # the command edge: loads the commands by name (importlib), routes `run`
OPTIONAL = {"pool", "night"}
RAY_MODULES = {"pool.pool_runner", "pool.pool_task"}


def _modules():
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def room(name):
    return name.split(".")[0] if "." in name else ""


def _resolve(target):
    """The package module an import names (the longest known prefix), or None outside the package."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def imports(name):
    """(module imported, line) for every import of a package module in `name`, at any depth."""
    path = MODULES[name]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(["autoresearch", *package[:len(package) - node.level + 1]] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base == "autoresearch" or base.startswith("autoresearch."):
                inner = base[len("autoresearch."):] if base != "autoresearch" else ""
                for alias in node.names:
                    full = f"{inner}.{alias.name}".strip(".")
                    targets.append(full if full in MODULES else inner)
        elif isinstance(node, ast.Import):
            targets = [a.name[len("autoresearch."):] for a in node.names if a.name.startswith("autoresearch.")]
        for target in targets:
            module = _resolve(target)
            if module and module != name:
                found.append((module, node.lineno))
    return found


def test_no_folder_holds_more_than_15_modules():
    folders = {}
    for path in MODULES.values():
        folders.setdefault(path.parent, []).append(path)
    for folder, files in folders.items():
        modules = [f for f in files if f.name != "__init__.py"]
        assert len(modules) <= 15, f"{folder.relative_to(PACKAGE.parent)} holds {len(modules)} modules"
    assert len(folders) > 5, "the engine is in rooms"
    # The diagnoser beside it too: its rules are a room of their own.
    for folder in [PACKAGE.parent / "gpu_train_debug", *(PACKAGE.parent / "gpu_train_debug").glob("*/")]:
        modules = [f for f in folder.glob("*.py") if f.name != "__init__.py"]
        assert len(modules) <= 15, f"{folder.relative_to(PACKAGE.parent)} holds {len(modules)} modules"


def test_imports_point_down_the_rooms():
    wrong = []
    for name in MODULES:
        if (room(name), name) in EDGE or name in ("", "__main__"):
            continue
        allowed = BELOW[room(name)] | {room(name)}
        for module, line in imports(name):
            if room(module) not in allowed:
                wrong.append(f"{name}:{line} imports {module}")
            elif module == "cli" and room(name) not in OPTIONAL | {"setup"}:
                wrong.append(f"{name}:{line} imports the command edge (cli); raise errors.* instead")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle_lazy_imports_included():
    graph = {name: {m for m, _ in imports(name)} for name in MODULES}
    seen, on_path, cycles = set(), [], []

    def visit(node):
        if node in on_path:
            cycles.append(on_path[on_path.index(node):] + [node])
            return
        if node in seen:
            return
        seen.add(node)
        on_path.append(node)
        for nxt in sorted(graph[node]):
            visit(nxt)
        on_path.pop()

    for name in sorted(graph):
        visit(name)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_only_the_pool_imports_ray():
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        uses = any(isinstance(n, ast.Import) and any(a.name.split(".")[0] == "ray" for a in n.names)
                   or isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "ray"
                   for n in ast.walk(tree))
        assert not uses or name in RAY_MODULES, f"{name} imports Ray"


def test_the_optional_parts_are_imported_only_at_the_command_edge():
    for name in MODULES:
        if room(name) in OPTIONAL | {"setup"} or (room(name), name) in EDGE:
            continue
        for module, line in imports(name):
            assert room(module) not in OPTIONAL, f"{name}:{line} imports {module}"


def _private_uses(name):
    """`alias._helper` and `from x import _helper` where x is a package module of another room."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autoresearch"):
            inner = (node.module or "")[len("autoresearch."):] if node.module != "autoresearch" else ""
            for alias in node.names:
                full = f"{inner}.{alias.name}".strip(".")
                if full in MODULES:
                    aliases[alias.asname or alias.name] = full
                elif alias.name.startswith("_") and not alias.name.startswith("__") and room(inner) != room(name):
                    yield f"{name}:{node.lineno} imports {inner}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            target = aliases[node.value.id]
            if node.attr.startswith("_") and not node.attr.startswith("__") and room(target) != room(name):
                yield f"{name}:{node.lineno} uses {target}.{node.attr}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_private_helper_crosses_a_room(name):
    found = list(_private_uses(name))
    assert not found, "\n".join(found)


def test_the_checker_sees_a_wrong_import_and_a_cycle(tmp_path, monkeypatch):
    """The checks above can fail: a lazy import of the pool from the store is reported, and so is
    a cycle through it."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from autoresearch.pool import pool\n    return pool\n", encoding="utf-8")
    monkeypatch.setitem(MODULES, "store.probe", probe)
    assert ("pool.pool", 2) in imports("store.probe")
    with pytest.raises(AssertionError, match="store.probe:2 imports pool.pool"):
        test_imports_point_down_the_rooms()
    back = tmp_path / "back.py"
    back.write_text("from autoresearch.store import probe\n", encoding="utf-8")
    probe.write_text("from autoresearch.store import back\n", encoding="utf-8")
    monkeypatch.setitem(MODULES, "store.back", back)
    with pytest.raises(AssertionError, match="store.back -> store.probe -> store.back|store.probe -> store.back -> store.probe"):
        test_no_import_cycle_lazy_imports_included()


def test_what_make_check_leaves_out_names_files_that_exist():
    """A renamed slow test must not fall into `make check` unnoticed (tests/conftest.py NEEDS)."""
    from conftest import NEEDS
    tests = Path(__file__).resolve().parents[1]
    missing = [p for paths in NEEDS.values() for p in paths if not (tests / p).exists()]
    assert not missing, missing
