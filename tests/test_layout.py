"""The package layout: imports go one way, private names stay in their module,
the demos stay out of the capabilities."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules() -> dict[str, Path]:
    """Every module of jurist by dotted name (a package by its own name)."""
    out = {}
    for path in (SRC / "jurist").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, str, int]]:
    """(module imported, name imported or "", line) for every jurist import of a
    module, at any depth (function-level and TYPE_CHECKING imports included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(a.name, "", node.lineno) for a in node.names if a.name.split(".")[0] == "jurist"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            if base.split(".")[0] != "jurist":
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.append((sub, "", node.lineno) if sub in modules else (base, a.name, node.lineno))
    return found


def test_no_import_cycles_between_modules():
    modules = _modules()
    graph = {m: {t for t, _, _ in _imports(m, p, modules) if t in modules and t != m} for m, p in modules.items()}
    cycles = []
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycles.append(path[path.index(t):] + [t])
            elif t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_no_module_imports_a_private_name_of_another():
    modules = _modules()
    private = [f"{m}:{line} imports {t}.{n}" for m, p in modules.items() for t, n, line in _imports(m, p, modules)
               if n.startswith("_") and not n.startswith("__")]
    assert not private, "\n".join(private)


def test_only_the_command_line_imports_the_demos():
    modules = _modules()
    demo_users = {m for m, p in modules.items() for t, _, _ in _imports(m, p, modules)
                  if t.startswith("jurist.demo") and not m.startswith("jurist.demo")}
    assert demo_users == {"jurist.cli.demo"}
