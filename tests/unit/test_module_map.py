"""The module map in docs/architecture.md ("The module map") is the rule; this test reads it and every import.

A module may import its own map entry and entries of lower layers; siblings of one layer do not import each other.
The driver and the web framework stay in their rooms, and the driver's row type stays at or below the log. The
imports that break the map today are listed in ``KNOWN_EXCEPTIONS``, by name: the list only shrinks, and an entry
that no longer matches an import fails the test, so a fix cannot leave a stale permission behind.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "openmaic"
MAP_DOC = ROOT / "docs" / "architecture.md"

# (importer, imported) pairs, both full module names, that break the map today. Remove a pair when its import goes.
KNOWN_EXCEPTIONS: frozenset[tuple[str, str]] = frozenset(
    {
        # A run opens its media lane; the lane reads the run it serves and reports to it.
        ("openmaic.media.commands", "openmaic.runs.events"),
        ("openmaic.media.commands", "openmaic.runs.fold"),
        ("openmaic.media.commands", "openmaic.runs.views"),
        ("openmaic.media.lane", "openmaic.runs.events"),
        ("openmaic.media.lane", "openmaic.runs.fold"),
        ("openmaic.runs.kind", "openmaic.media.lane"),
    }
)

DRIVER = {"asyncpg", "trio_asyncio"}
DRIVER_HOME = {"openmaic.store.database"}
WEB = {"quart", "quart_trio", "hypercorn"}
WEB_HOMES = ("openmaic.api", "openmaic.admin")
ROW_TYPE = "openmaic.store.database.Record"
ROW_TYPE_HOMES = ("openmaic.store", "openmaic.events")


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # a module, or module.name for `from module import name`
    line: int


def read_map(text: str) -> dict[str, int]:
    """Entry (full module name) → layer, from the table under "The module map"."""
    section = text.split("## 10. The module map", 1)[1].split("\n## ", 1)[0]
    layers: dict[str, int] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].isdigit():
            continue
        for entry in re.findall(r"`([\w.]+)`", cells[1]):
            assert entry not in layers, f"{entry} is on the map twice"
            layers["openmaic." + entry] = int(cells[0])
    assert layers, "no module map found in docs/architecture.md"
    return layers


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    rel = Path(*name.split(".")[1:]) if "." in name else Path()
    return (PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel / "__init__.py").is_file()


def imports_of(path: Path) -> list[Import]:
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: list[Import] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [Import(name, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # `module.name`: internal_module() later tells a submodule (`from package import module`) from a name.
            found += [Import(name, f"{module}.{alias.name}", node.lineno) for alias in node.names]
    return found


def all_imports() -> list[Import]:
    return [imp for path in sorted(PACKAGE.rglob("*.py")) for imp in imports_of(path)]


def entry_of(module: str, layers: dict[str, int]) -> str | None:
    best = None
    for entry in layers:
        if (module == entry or module.startswith(entry + ".")) and (best is None or len(entry) > len(best)):
            best = entry
    return best


def internal_module(target: str) -> str:
    """The module an internal import target names (``pkg.mod.name`` → ``pkg.mod``)."""
    while not is_module(target):
        target = target.rsplit(".", 1)[0]
    return target


def map_violations(imports: list[Import], layers: dict[str, int]) -> list[tuple[Import, str]]:
    bad: list[tuple[Import, str]] = []
    for imp in imports:
        top = imp.target.split(".")[0]
        if top in DRIVER and imp.importer not in DRIVER_HOME:
            bad.append((imp, "the database driver is imported by store/database.py alone"))
        if top in WEB and not imp.importer.startswith(WEB_HOMES):
            bad.append((imp, "the web framework is imported by api and admin alone"))
        if top != "openmaic":
            continue
        if imp.target == ROW_TYPE and not imp.importer.startswith(ROW_TYPE_HOMES):
            bad.append((imp, "the driver's row type goes no higher than events"))
        target = internal_module(imp.target)
        src, dst = entry_of(imp.importer, layers), entry_of(target, layers)
        if src is None or dst is None or src == dst:
            continue
        if layers[dst] > layers[src]:
            bad.append((imp, f"{src} (layer {layers[src]}) imports upward: {dst} (layer {layers[dst]})"))
        elif layers[dst] == layers[src] and src.split(".")[1] != dst.split(".")[1]:
            bad.append((imp, f"{src} imports its sibling {dst} (both layer {layers[src]})"))
    return bad


def is_excepted(imp: Import, reason: str) -> bool:
    if reason.startswith("the driver") or reason.startswith("the web framework"):
        return False  # the driver, its row type and the web framework stay in their rooms: no exceptions
    return (imp.importer, internal_module(imp.target)) in KNOWN_EXCEPTIONS


def test_every_module_is_on_the_map() -> None:
    layers = read_map(MAP_DOC.read_text())
    modules = [module_name(p) for p in sorted(PACKAGE.rglob("*.py"))]
    unmapped = [m for m in modules if m != "openmaic" and entry_of(m, layers) is None]
    assert unmapped == [], f"modules not on the module map in docs/architecture.md: {unmapped}"


def test_imports_follow_the_module_map() -> None:
    layers = read_map(MAP_DOC.read_text())
    violations = map_violations(all_imports(), layers)
    bad = [f"{i.importer}:{i.line} imports {i.target}: {why}" for i, why in violations if not is_excepted(i, why)]
    assert bad == [], "imports that break the module map (docs/architecture.md):\n" + "\n".join(bad)


def test_the_exception_lists_only_shrink() -> None:
    layers = read_map(MAP_DOC.read_text())
    violations = map_violations(all_imports(), layers)
    used = {(i.importer, internal_module(i.target)) for i, _ in violations}
    assert sorted(KNOWN_EXCEPTIONS - used) == [], "no longer needed: remove from KNOWN_EXCEPTIONS"


def test_only_the_log_appends() -> None:
    """No module above the log runs the append statement itself: the log counts, hints and fences every append,
    also inside a caller's transaction (``EventLog.appending``)."""
    raw = re.compile(r"\bQ\.append\w*\b|\.append_args\(")
    above = [p for p in sorted(PACKAGE.rglob("*.py")) if not module_name(p).startswith("openmaic.events")]
    found = [f"{module_name(p)}:{n}" for p in above for n, line in enumerate(p.read_text().splitlines(), 1)
             if raw.search(line)]
    assert found == [], "appends that bypass the event log"


def test_the_checker_sees_a_wrong_import() -> None:
    """The checker itself: an upward import, a sibling import and a driver import elsewhere are each caught."""
    layers = read_map(MAP_DOC.read_text())
    wrong = [
        Import("openmaic.events.log", "openmaic.runs.service.RunService", 1),
        Import("openmaic.workbench.kind", "openmaic.runs.kind", 1),
        Import("openmaic.runs.service", "asyncpg", 1),
        Import("openmaic.projections.library", "openmaic.store.database.Record", 1),
    ]
    reasons = [why for _, why in map_violations(wrong, layers)]
    assert len(reasons) == 4, reasons


MAX_LINES = 600
"""The house's size guideline ("no module over ~600 lines"): a module that outgrows it splits by what it holds."""


def test_no_module_outgrows_the_size_guideline() -> None:
    sizes = {module_name(p): len(p.read_text().splitlines()) for p in sorted(PACKAGE.rglob("*.py"))}
    over = {m: n for m, n in sizes.items() if n > MAX_LINES}
    assert over == {}, f"modules over {MAX_LINES} lines (split them by what they hold): {over}"
