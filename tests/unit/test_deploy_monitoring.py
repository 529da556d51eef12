"""deploy/prometheus and deploy/grafana: the alert rules and the dashboard use only metrics openmaic exports, and
cover the failure modes the test suite exercises (lease losses, takeovers, stuck sessions, projection lag, the
horizon's age). A renamed metric fails here, not silently on a dashboard."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from openmaic.metrics import REGISTRY

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
FAILURE_MODES = ("openmaic_lease_losses_total", "openmaic_takeovers_total", "openmaic_sessions_stuck",
                 "openmaic_projection_lag_seconds", "openmaic_horizon_age_seconds")  # fmt: skip
_NAME = re.compile(r"\b((?:openmaic|process|python)_[a-z0-9_]+)")


def exported() -> set[str]:
    """Every sample name /metrics can serve."""
    names: set[str] = set()
    for family in REGISTRY.collect():
        if family.type == "counter":
            names.add(family.name + "_total")
        elif family.type == "histogram":
            names |= {family.name + s for s in ("_bucket", "_sum", "_count")}
        else:
            names.add(family.name)
    return names


def used(expr: str) -> set[str]:
    return set(_NAME.findall(expr))


def test_the_exported_names_include_the_documented_ones():
    assert set(FAILURE_MODES) | {"openmaic_step_duration_seconds_bucket", "process_cpu_seconds_total"} <= exported()


def test_alert_rules_use_exported_metrics_and_cover_every_failure_mode():
    doc = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text("utf-8"))
    rules = [r for g in doc["groups"] for r in g["rules"]]
    names = exported()
    covered: set[str] = set()
    for rule in rules:
        where = rule.get("alert")
        assert where and rule.get("expr") and rule["labels"]["severity"] in ("warning", "critical"), rule
        assert rule["annotations"]["summary"] and "for" in rule, where
        assert used(rule["expr"]) <= names, (where, used(rule["expr"]) - names)
        covered |= used(rule["expr"])
    assert set(FAILURE_MODES) <= covered
    assert len({r["alert"] for r in rules}) == len(rules)


def test_the_dashboard_uses_exported_metrics_and_shows_every_failure_mode():
    doc = json.loads((DEPLOY / "grafana" / "openmaic.json").read_text("utf-8"))
    names = exported()
    panels = [p for p in doc["panels"] if p["type"] != "row"]
    shown: set[str] = set()
    for p in panels:
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert used(t["expr"]) <= names, (p["title"], used(t["expr"]) - names)
            shown |= used(t["expr"])
    assert set(FAILURE_MODES) <= shown
    assert {"openmaic_step_duration_seconds_bucket", "openmaic_provider_call_duration_seconds_bucket",
            "openmaic_live_feed_delivery_seconds_bucket", "openmaic_append_duration_seconds_bucket"} <= shown
    assert len({p["id"] for p in doc["panels"]}) == len(doc["panels"])
    assert doc["__inputs"][0]["pluginId"] == "prometheus"


def test_the_kubernetes_scrape_job_follows_the_pod_annotations():
    doc = yaml.safe_load((DEPLOY / "prometheus" / "kubernetes.yml").read_text("utf-8"))
    (job,) = doc["scrape_configs"]
    sources = {label for r in job["relabel_configs"] for label in r.get("source_labels", [])}
    assert {"__meta_kubernetes_pod_annotation_prometheus_io_scrape", "__meta_kubernetes_pod_annotation_prometheus_io_port",
            "__meta_kubernetes_pod_annotation_prometheus_io_path"} <= sources  # fmt: skip


@pytest.mark.parametrize("broken", ["openmaic_lease_loss_total", "openmaic_horizon_age"])
def test_a_misspelt_metric_is_caught(broken):
    assert not used(f"sum(rate({broken}[5m]))") <= exported()
