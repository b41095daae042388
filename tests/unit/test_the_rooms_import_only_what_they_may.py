"""The layout's boundaries, from the source: the operator (`controller/`) never imports the worker
(a Job's code runs in its pod, not in the operator), and the catalog (`catalog/`, its reader and its
writer) never imports the operator, so consumers and the CLI use it without kopf or Kubernetes."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "enginewright"


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize(
    ("room", "forbidden"), [("controller", "enginewright.worker"), ("catalog", "enginewright.controller")]
)
def test_a_room_does_not_import_what_it_must_not(room, forbidden):
    modules = sorted((PACKAGE / room).glob("*.py"))
    assert modules, f"no modules under {PACKAGE / room}"
    bad = {
        f"{path.name}: {name}"
        for path in modules
        for name in imported(path)
        if name == forbidden or name.startswith(forbidden + ".")
    }
    assert not bad, bad
