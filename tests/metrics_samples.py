"""The samples of a Prometheus exposition by name and labels, for the tests that read a
``/metrics``."""

from __future__ import annotations

from collections.abc import Mapping

import httpx
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples_of(text: str) -> Samples:
    """Every sample of the exposition `text`, by name and sorted labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scraped(url: str, headers: Mapping[str, str]) -> Samples:
    """The samples of ``GET url/metrics`` with `headers` (it must answer 200)."""
    answer = httpx.get(url + "/metrics", headers=dict(headers), timeout=30)
    assert answer.status_code == 200, answer.text
    return samples_of(answer.text)


def by_label(samples: Samples, name: str, label: str) -> dict[str, float]:
    """The samples named `name`, by the value of their label `label`."""
    return {
        dict(labels)[label]: value
        for (sample, labels), value in samples.items()
        if sample == name and label in dict(labels)
    }
