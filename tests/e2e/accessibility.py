"""axe-core (as axe-playwright-python bundles it) run in a page: the violations that matter."""

from __future__ import annotations

from axe_playwright_python.sync_playwright import Axe

from tests.e2e.test_workbench_ui import Page

BLOCKING = ("serious", "critical")
_AXE = Axe()


def serious_violations(page: Page) -> list[str]:
    """Each serious or critical axe-core violation of the page as it is now: rule, impact, the nodes it names."""
    found = _AXE.run(page).response["violations"]
    return [f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:5]}"
            for v in found if v.get("impact") in BLOCKING]
