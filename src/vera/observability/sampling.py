"""Which spans are recorded: the sampler the standard variables name
(``OTEL_TRACES_SAMPLER``, ``OTEL_TRACES_SAMPLER_ARG``), under one rule of VERA's: a trace
starts only where a request enters (a SERVER span). Background loops (the change-log
tailer, the pack sweeper, listeners) call other services and run statements on their own
and would otherwise fill the trace store with one trace per poll."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import sampling
from opentelemetry.trace import Link, SpanKind, TraceState
from opentelemetry.util.types import Attributes

from vera.config import ConfigError

DEFAULT = "parentbased_always_on"


class EntryRooted(sampling.Sampler):
    """``inner``'s decision, except that a root span other than a SERVER one is dropped."""

    def __init__(self, inner: sampling.Sampler) -> None:
        self._inner = inner

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> sampling.SamplingResult:
        parent = trace.get_current_span(parent_context).get_span_context()
        if not parent.is_valid and kind is not SpanKind.SERVER:
            return sampling.SamplingResult(sampling.Decision.DROP)
        return self._inner.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )

    def get_description(self) -> str:
        return f"EntryRooted{{{self._inner.get_description()}}}"


def sampler_from(environ: Mapping[str, str]) -> sampling.Sampler:
    """The sampler the variables name; a bad one raises ConfigError naming it."""
    name = environ.get("OTEL_TRACES_SAMPLER", DEFAULT).strip().lower() or DEFAULT
    argument = environ.get("OTEL_TRACES_SAMPLER_ARG", "").strip()
    try:
        ratio = float(argument) if argument else 1.0
    except ValueError:
        ratio = -1.0
    if not 0.0 <= ratio <= 1.0:
        raise ConfigError("OTEL_TRACES_SAMPLER_ARG: a ratio between 0 and 1")
    roots: dict[str, sampling.Sampler] = {
        "always_on": sampling.ALWAYS_ON,
        "always_off": sampling.ALWAYS_OFF,
        "traceidratio": sampling.TraceIdRatioBased(ratio),
    }
    if name in roots:
        return EntryRooted(roots[name])
    root = name.removeprefix("parentbased_")
    if name.startswith("parentbased_") and root in roots:
        return EntryRooted(sampling.ParentBased(roots[root]))
    raise ConfigError(
        "OTEL_TRACES_SAMPLER: always_on, always_off, traceidratio, or parentbased_ and one "
        "of them"
    )
