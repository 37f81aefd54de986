"""The attribution core's modules import each other without a cycle, no new cycle appears
elsewhere in the package, and streaming calls no private method of TokenShapley.

The graph has an edge A -> B when module A of ``tokenshapley_rag`` imports module B of it
anywhere, imports inside functions included (a lazy import is still a dependency, and a
cycle through one only waits for the first call to show up). Imports under
``if TYPE_CHECKING:`` are left out: they run for type checkers only.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tokenshapley_rag"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` blocks."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                out.update(id(n) for n in ast.walk(child))
    return out


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The package modules that ``path`` imports (a ``from package import name`` counts as
    an import of ``package.name`` when that is a module, else of ``package``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for a in node.names:
                if f"{base}.{a.name}" in modules:
                    out.add(f"{base}.{a.name}")
                elif base in modules:
                    out.add(base)
    out.discard(me)
    return out


def _graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    return {_module_name(p): _imports(p, modules) for p in paths}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other in a cycle (the strongly connected
    components of more than one module, Tarjan's algorithm), each sorted, in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(out)


def test_the_graph_sees_the_imports():
    graph = _graph()
    assert "tokenshapley_rag._pipeline" in graph["tokenshapley_rag._attribution"]
    assert "tokenshapley_rag._stream" in graph["tokenshapley_rag._attribution"]  # lazy, inside stream()
    assert "tokenshapley_rag._attribution" not in graph["tokenshapley_rag._stream"]  # TYPE_CHECKING only


def test_the_package_has_no_import_cycle():
    # Lazy imports inside functions count: the command line, the harness, the chain report
    # and the chat app included.
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_them():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}}) == [["a", "b", "c"], ["d", "e"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_streaming_calls_no_private_method_of_tokenshapley():
    tree = ast.parse((PACKAGE / "_stream.py").read_text(encoding="utf-8"))
    private = [
        ast.unparse(n) for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")
        and isinstance(n.value, ast.Name) and n.value.id == "ts"
    ]
    assert private == []
