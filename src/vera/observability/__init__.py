"""What operators see of a running VERA: traces (``tracing``, ``sampling``,
``span_privacy``), the Prometheus listener every process serves its metrics on
(``metrics_listener``) and a gRPC service's own metrics (``service_metrics``).

Nothing here carries content: no query, prompt, fact text, token, API key or principal
id reaches a span, a log line or a metric label."""
