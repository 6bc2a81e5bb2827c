"""Parsing vLLM's Prometheus exposition into CacheMetrics; hit rates over intervals."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prefixkit.engine_adapter.engine.metrics import (
    CacheMetrics,
    fleet_interval,
    parse_cache_metrics,
)

# the shape vLLM 0.32 (CPU) serves on /metrics, trimmed to the families we read
EXPOSITION = """\
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="smol"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="smol"} 0.5
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="smol"} 1000.0
vllm:prefix_cache_queries_total{engine="1",model_name="smol"} 600.0
vllm:prefix_cache_queries_created{engine="0",model_name="smol"} 1.79e+09
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="smol"} 640.0
vllm:prefix_cache_hits_total{engine="1",model_name="smol"} 160.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="32",enable_prefix_caching="True",engine="0",num_gpu_blocks="728",prefix_caching_hash_algo="sha256_cbor"} 1.0
"""


def _metrics(queried: float, hits: float) -> CacheMetrics:
    return CacheMetrics(queried, hits, 0.0, 32, "sha256_cbor", 728, True)


def test_counters_are_summed_over_engines() -> None:
    metrics = parse_cache_metrics(EXPOSITION)
    assert metrics.queried_tokens == 1600
    assert metrics.hit_tokens == 800


def test_kv_usage_is_the_fullest_engine() -> None:
    assert parse_cache_metrics(EXPOSITION).kv_usage == 0.5


def test_cache_config_labels_are_read() -> None:
    metrics = parse_cache_metrics(EXPOSITION)
    assert (metrics.block_size, metrics.hash_algo, metrics.num_blocks) == (32, "sha256_cbor", 728)
    assert metrics.prefix_caching is True


def test_missing_families_read_as_unknown() -> None:
    metrics = parse_cache_metrics("")
    assert (metrics.queried_tokens, metrics.block_size, metrics.prefix_caching) == (0, None, None)


def test_interval_hit_rate_is_a_difference_of_counters() -> None:
    interval = _metrics(1600, 800).since(_metrics(1000, 700))
    assert (interval.queried_tokens, interval.hit_tokens) == (600, 100)
    assert interval.hit_rate == 100 / 600


def test_counters_going_down_mean_a_restart_and_count_from_zero() -> None:
    interval = _metrics(50, 10).since(_metrics(1000, 700))
    assert (interval.queried_tokens, interval.hit_tokens) == (50, 10)


def test_a_fleet_interval_sums_each_replicas_own_interval() -> None:
    before = [_metrics(1000, 700), _metrics(1000, 700)]
    after = [_metrics(1600, 800), _metrics(50, 10)]  # the second replica restarted
    interval = fleet_interval(before, after)
    assert (interval.queried_tokens, interval.hit_tokens) == (650, 110)


def test_no_queries_means_zero_hit_rate() -> None:
    assert _metrics(5, 5).since(_metrics(5, 5)).hit_rate == 0.0


@given(st.integers(0, 10**12), st.integers(0, 10**12), st.integers(0, 10**9), st.integers(0, 10**9))
def test_interval_hit_rate_is_a_fraction(q0: int, h0: int, dq: int, dh: int) -> None:
    # token counters are whole numbers
    earlier = _metrics(q0, min(h0, q0))
    later = _metrics(q0 + dq, min(h0, q0) + min(dh, dq))
    assert 0.0 <= later.since(earlier).hit_rate <= 1.0
