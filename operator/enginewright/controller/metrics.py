"""Prometheus metrics of the operator (served on the metrics port by `handlers`)."""

from prometheus_client import Counter, Gauge, Histogram

ROUTES_MEASURED = Counter("enginewright_routes_measured_total", "Cache entries aggregated, by outcome",
                          ["outcome"])
BUILD_SECONDS = Histogram("enginewright_route_build_seconds", "Build time of a route",
                          buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800))
MEASURE_SECONDS = Histogram("enginewright_route_measure_seconds", "Timed execution of a route",
                            buckets=(0.1, 0.5, 1, 5, 15, 60, 300))
JOBS_CREATED = Counter("enginewright_jobs_created_total", "Worker Jobs created")
ACTIVE_JOBS = Gauge("enginewright_active_jobs", "Worker Jobs running, per run and target",
                    ["namespace", "run", "target"])
RECONCILE_SECONDS = Histogram("enginewright_reconcile_seconds", "Duration of one reconcile pass of a run",
                              buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
BEST_SPEEDUP = Gauge("enginewright_best_speedup", "Winner over the default route, per run and target",
                     ["namespace", "run", "target"])
