"""The serving app's lifespan keeps what its startup made out of the garbage collector's
sight, and collects young objects less often, while it serves; it gives both back when it
stops."""

from __future__ import annotations

import gc

from prefixkit.engine_adapter.serving.app import SERVING_GC_THRESHOLDS, serving_app
from prefixkit.engine_adapter.serving.router import DirectRoute
from starlette.testclient import TestClient


def test_startup_objects_are_frozen_while_serving_and_unfrozen_at_shutdown() -> None:
    made_before = [object()]  # a container: tracked by the collector
    app = serving_app(DirectRoute("http://127.0.0.1:9", ["http://127.0.0.1:9"]))
    with TestClient(app):
        serving = gc.get_freeze_count()
        scanned_while_serving = any(o is made_before for o in gc.get_objects())
    assert serving > 0
    assert not scanned_while_serving
    assert gc.get_freeze_count() == 0
    assert any(o is made_before for o in gc.get_objects())


def test_young_collections_are_rarer_while_serving_and_as_before_after_shutdown() -> None:
    before = gc.get_threshold()
    app = serving_app(DirectRoute("http://127.0.0.1:9", ["http://127.0.0.1:9"]))
    with TestClient(app):
        serving = gc.get_threshold()
    assert serving == SERVING_GC_THRESHOLDS
    assert serving[0] > before[0]
    assert gc.get_threshold() == before
