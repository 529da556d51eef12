"""No ``finally`` block ends its function or loop early.

A ``return``, ``break`` or ``continue`` inside ``finally`` silently drops whatever exception was leaving the
``try``, a ``trio.Cancelled`` included: a held connection's cleanup that returned early once swallowed every error
raised in the block it closed, and a cancellation with them. (Python 3.14 warns about it too, PEP 765.)
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def early_exits(source: str) -> list[int]:
    """Lines of a ``return``/``break``/``continue`` that would leave a ``finally`` block (one inside a function or
    loop nested in the block leaves only that)."""

    def scan(node: ast.AST, loop_inside: bool) -> list[int]:
        found: list[int] = []
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(child, ast.Return) or (isinstance(child, (ast.Break, ast.Continue)) and not loop_inside):
                found.append(child.lineno)
            nested_loop = isinstance(child, (ast.For, ast.AsyncFor, ast.While))
            found += scan(child, loop_inside or nested_loop)
        return found

    lines: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Try, ast.TryStar)):
            for stmt in node.finalbody:
                lines += scan(ast.Module(body=[stmt], type_ignores=[]), False)
    return sorted(lines)


def test_the_check_sees_an_early_exit_and_nothing_else():
    source = '''
def f():
    try:
        pass
    finally:
        return 1
def g():
    for _ in range(2):
        try:
            pass
        finally:
            if True:
                continue
def h():
    try:
        pass
    finally:
        for _ in range(2):
            break
        def inner():
            return 2
'''
    assert early_exits(source) == [6, 13]


def test_no_finally_block_in_the_project_ends_early():
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for top in ("openmaic", "tests", "benchmarks")
        for path in sorted((ROOT / top).rglob("*.py"))
        for line in early_exits(path.read_text())
    ]
    assert offenders == [], "a return/break/continue inside `finally` swallows the exception leaving the try"
