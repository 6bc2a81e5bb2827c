"""The Grafana dashboard (deploy/monitoring/grafana-dashboard.json) and the alert rules query
only metrics the gateway really exports: an operator's ``GET /metrics`` of a running
deployment (the serving app, the precise router and two fake replicas) is the oracle, never
a list kept beside the dashboard."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prefixkit.engine_adapter import Tenants, Topology, deploy
from prefixkit.testing.fake_vllm import FakeVLLM, free_port
from prometheus_client.parser import text_string_to_metric_families

MONITORING = Path(__file__).parent.parent.parent / "deploy" / "monitoring"
DASHBOARD = MONITORING / "grafana-dashboard.json"
RULES = MONITORING / "prefixkit-alerts.yml"
TENANTS = Tenants({"key-acme": "acme"}, "dashboard-test-secret-0123456789", {"key-ops": "ops"})

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_WORD = re.compile(r"(?<![$\w:])[A-Za-z_:][A-Za-z0-9_:]*")
_KEYWORDS = frozenset(
    {"and", "or", "unless", "offset", "bool", "inf", "nan", "group_left", "group_right"}
)
_LABEL_VALUES = re.compile(r"label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (not its functions, labels or keywords)."""
    expr = _LABEL_LIST.sub(" ", _RANGE.sub(" ", _MATCHERS.sub(" ", _STRING.sub('""', expr))))
    names = set()
    for word in _WORD.finditer(expr):
        called = expr[word.end() :].lstrip().startswith("(")
        if not called and word.group().lower() not in _KEYWORDS:
            names.add(word.group())
    return names


def _panel_exprs(panels: list[dict[str, Any]]) -> Iterator[str]:
    for panel in panels:
        yield from (target["expr"] for target in panel.get("targets", []))
        yield from _panel_exprs(panel.get("panels", []))


def dashboard_names() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    names = set().union(*map(metric_names, _panel_exprs(dashboard["panels"])))
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            names |= set(_LABEL_VALUES.findall(variable["definition"]))
    return names


def rule_names() -> set[str]:
    """The metrics the alert rules read, less the series their recording rules make."""
    rules = [
        rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]
    ]
    read = set().union(*(metric_names(rule["expr"]) for rule in rules))
    return read - {rule["record"] for rule in rules if "record" in rule}


@contextlib.contextmanager
def _deployment() -> Iterator[str]:
    fakes = [FakeVLLM(kv_events=True) for _ in range(2)]
    with contextlib.ExitStack() as stack:
        for fake in fakes:
            stack.enter_context(fake)
        topology = Topology(replicas=2, router="precise", port=free_port())
        yield stack.enter_context(
            deploy([fake.endpoint for fake in fakes], topology, tenants=TENANTS)
        ).url


@pytest.fixture(scope="module")
def exported() -> set[str]:
    """Every sample name of an operator's /metrics after a tenant's request."""
    with _deployment() as url:
        answer = httpx.post(
            url + "/v1/completions",
            json={"model": "fake-model", "prompt": "hello", "max_tokens": 2},
            headers={"authorization": "Bearer key-acme"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        text = httpx.get(
            url + "/metrics", headers={"authorization": "Bearer key-ops"}, timeout=30
        ).text
    return {
        sample.name for family in text_string_to_metric_families(text) for sample in family.samples
    }


def test_the_names_of_a_promql_expression_are_its_metrics() -> None:
    expr = (
        'sum by (tenant) (rate(a_total{tenant=~"$tenant"}[$__rate_interval])) '
        "/ on (tenant) group_left max(b:c offset 1h) > bool 0.7 and d"
    )
    assert metric_names(expr) == {"a_total", "b:c", "d"}


def test_every_metric_the_dashboard_queries_is_exported_by_the_gateway(
    exported: set[str],
) -> None:
    names = dashboard_names()
    assert names and names <= exported, f"not exported: {sorted(names - exported)}"


def test_every_metric_the_alert_rules_read_is_exported_by_the_gateway(
    exported: set[str],
) -> None:
    names = rule_names()
    assert names and names <= exported, f"not exported: {sorted(names - exported)}"


def test_the_dashboard_shows_every_prefixkit_metric_the_gateway_exports(
    exported: set[str],
) -> None:
    ours = {name for name in exported if name.startswith("prefixkit_")}
    assert ours - dashboard_names() == set()
