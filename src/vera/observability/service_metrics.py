"""Bounded Prometheus metrics of a gRPC service process, served on its own listener
(``metrics_listener``) when ``VERA_OBSERVABILITY__SERVICE_METRICS_PORT`` is set.

Every service: its calls per service, method and status code, their latency per service
and method, and its PostgreSQL pool's saturation. A service adds its own gauges read at
scrape time (``gauge``): retrieval its index lag behind the change log and its ranking
switch-offs, knowledge its proposal queue. Labels are the methods the server registered
(an unknown method never reaches ``observe``), the 17 gRPC codes and fixed names, nothing
a caller sends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

# The latency objective's buckets: a service call is well under the gateway's budget.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Pool(Protocol):
    """What an asyncpg pool tells of its saturation."""

    def get_size(self) -> int: ...
    def get_idle_size(self) -> int: ...
    def get_max_size(self) -> int: ...


Reading = Callable[[], float | None]


class _ScrapeTime(Collector):
    """Families whose values are read when Prometheus scrapes (None: not reported)."""

    def __init__(self) -> None:
        self.gauges: list[tuple[str, str, Reading]] = []
        self.counters: list[tuple[str, str, Reading]] = []
        self.pools: list[tuple[str, Pool]] = []

    def collect(self) -> Iterator[Any]:
        for name, documentation, read in self.gauges:
            value = read()
            if value is not None:
                yield GaugeMetricFamily(name, documentation, value=value)
        for name, documentation, read in self.counters:
            value = read()
            if value is not None:
                yield CounterMetricFamily(name, documentation, value=value)
        if not self.pools:
            return
        in_use = GaugeMetricFamily(
            "vera_db_pool_connections_in_use",
            "PostgreSQL connections of the pool lent to a call now.", labels=("pool",))
        size = GaugeMetricFamily(
            "vera_db_pool_connections", "PostgreSQL connections the pool holds open.",
            labels=("pool",))
        most = GaugeMetricFamily(
            "vera_db_pool_max_connections", "The pool's limit (VERA_DATABASE__POOL_MAX_SIZE).",
            labels=("pool",))
        for name, pool in self.pools:
            held = pool.get_size()
            in_use.add_metric((name,), held - pool.get_idle_size())
            size.add_metric((name,), held)
            most.add_metric((name,), pool.get_max_size())
        yield from (in_use, size, most)


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._calls = Counter(
            "vera_grpc_server_handled",
            "gRPC calls a service finished, by service, method and status code.",
            ("grpc_service", "grpc_method", "grpc_code"),
            registry=self.registry,
        )
        self._latency = Histogram(
            "vera_grpc_server_handling_seconds",
            "gRPC call latency in the server, by service and method.",
            ("grpc_service", "grpc_method"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._scrape_time = _ScrapeTime()
        self.registry.register(self._scrape_time)

    def observe(self, full_method: str, code: str, seconds: float) -> None:
        """A finished call of a registered method (``/package.Service/Method``)."""
        service, _, method = full_method.lstrip("/").partition("/")
        self._calls.labels(service, method, code).inc()
        self._latency.labels(service, method).observe(seconds)

    def pool(self, name: str, pool: Pool) -> None:
        """Reports ``pool``'s saturation as ``pool=name`` (the service's schema)."""
        self._scrape_time.pools.append((name, pool))

    def gauge(self, name: str, documentation: str, read: Reading) -> None:
        self._scrape_time.gauges.append((name, documentation, read))

    def counter(self, name: str, documentation: str, read: Reading) -> None:
        """A counter the service keeps itself (``read``: its total since start)."""
        self._scrape_time.counters.append((name, documentation, read))
