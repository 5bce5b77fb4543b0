"""deploy/grafana/pingo-dashboard.json is an importable Grafana dashboard built on the
metrics Pingo serves: every series a query names is one shared/metrics.py defines, with
the suffix its type gives it and labels it has, so renaming a metric fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client.metrics import MetricWrapperBase

from shared import metrics
from shared.states import ActionState, DatasetState, WorkflowState

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "pingo-dashboard.json"
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}
# A series selector: a name, then optionally its label matchers.
SELECTOR = re.compile(r"\b(pingo_[a-z0-9_]+)\b(\{[^}]*\})?")
PANEL_TYPES = {"row", "timeseries", "stat", "gauge", "bargauge", "table", "heatmap"}


def pingo_metrics() -> dict[str, MetricWrapperBase]:
    return {m._name: m for m in vars(metrics).values() if isinstance(m, MetricWrapperBase)}


def served_series() -> dict[str, tuple[str, set[str]]]:
    """Every series name shared/metrics.py's metrics are exposed as -> (metric, its labels)."""
    out = {}
    for name, metric in pingo_metrics().items():
        for suffix in SUFFIXES[metric._type]:
            labels = set(metric._labelnames) | ({"le"} if suffix == "_bucket" else set())
            out[name + suffix] = (name, labels)
    return out


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels_of(dashboard: dict) -> list[dict]:
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def test_it_has_the_shape_grafana_imports(dashboard: dict) -> None:
    assert dashboard["title"] and dashboard["uid"] and dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == "prometheus"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for p in dashboard["panels"]:
        assert p["type"] in PANEL_TYPES, p["title"]
        pos = p["gridPos"]
        assert all(isinstance(pos[k], int) for k in ("x", "y", "w", "h")) and pos["x"] + pos["w"] <= 24, p["title"]
    for p in panels_of(dashboard):
        assert p["datasource"]["uid"] == "${DS_PROMETHEUS}", p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["refId"] and t["expr"].strip() and t["datasource"]["uid"] == "${DS_PROMETHEUS}", p["title"]


def test_every_series_a_query_names_is_served_with_its_labels(dashboard: dict) -> None:
    served = served_series()
    states = {str(s) for s in (*ActionState, *DatasetState, *WorkflowState)}
    for p in panels_of(dashboard):
        for t in p["targets"]:
            expr = t["expr"]
            found = SELECTOR.findall(expr)
            assert found, f"{p['title']}: {expr} names no Pingo metric"
            for name, matchers in found:
                assert name in served, f"{p['title']}: {name} is not a series shared/metrics.py serves"
                _, labels = served[name]
                for label, value in re.findall(r'(\w+)\s*=~?\s*"([^"]*)"', matchers):
                    assert label in labels, f"{p['title']}: {name} has no label {label}"
                    if label in ("target", "source", "state"):
                        unknown = set(value.split("|")) - states
                        assert not unknown, f"{p['title']}: no state named {unknown}"
            for grouped in re.findall(r"by \(([^)]*)\)", expr):
                for label in (g.strip() for g in grouped.split(",")):
                    if label != "instance":  # added by Prometheus at scrape time
                        assert any(label in served[n][1] for n, _ in found), f"{p['title']}: nothing has {label}"


def test_every_pingo_metric_has_a_panel(dashboard: dict) -> None:
    exprs = " ".join(t["expr"] for p in panels_of(dashboard) for t in p["targets"])
    used = {served_series()[name][0] for name, _ in SELECTOR.findall(exprs)}
    assert used == set(pingo_metrics())
