"""A real OTLP/HTTP export: the SDK's own OTLP exporter sends the spans over loopback to a
receiver that decodes the protobuf, as a collector would."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.trace.v1.trace_pb2 import Span as OtlpSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as OtlpStatus
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from otel_test_spans import (
    MODEL_SPAN_ID,
    RUN_SPAN_ID,
    T0,
    TOOL_SPAN_ID,
    TRACE_ID,
    model_span,
    run_trace,
)
from otlp_receiver import OtlpReceiver

from fevex.errors import FevexError
from fevex_opentelemetry import create_opentelemetry_exporter

pytestmark = pytest.mark.anyio


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


def otlp_provider(receiver: OtlpReceiver, compression: Compression) -> TracerProvider:
    """What an application sets up: a batch processor over the OTLP/HTTP exporter."""
    session = requests.Session()
    session.trust_env = False  # no proxy from the environment between us and loopback
    exporter = OTLPSpanExporter(
        endpoint=receiver.endpoint, compression=compression, session=session, timeout=30
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "support-desk"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def attributes(span: OtlpSpan) -> dict[str, object]:
    decoded: dict[str, object] = {}
    for pair in span.attributes:
        field = pair.value.WhichOneof("value")
        decoded[pair.key] = getattr(pair.value, field) if field else None
    return decoded


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
async def test_spans_reach_an_otlp_receiver_with_their_ids_and_parent_links(
    receiver: OtlpReceiver, compression: Compression
) -> None:
    provider = otlp_provider(receiver, compression)
    try:
        await create_opentelemetry_exporter(provider).export(run_trace())
        assert provider.force_flush()
    finally:
        provider.shutdown()

    spans = {span.name: span for span in receiver.spans()}
    assert set(spans) == {"invoke_agent support", "chat gpt-5-mini", "execute_tool lookup_account"}
    run, model, tool = (
        spans["invoke_agent support"],
        spans["chat gpt-5-mini"],
        spans["execute_tool lookup_account"],
    )
    assert {span.trace_id.hex() for span in spans.values()} == {TRACE_ID}
    assert (run.span_id.hex(), run.parent_span_id) == (RUN_SPAN_ID, b"")
    assert (model.span_id.hex(), model.parent_span_id.hex()) == (MODEL_SPAN_ID, RUN_SPAN_ID)
    assert (tool.span_id.hex(), tool.parent_span_id.hex()) == (TOOL_SPAN_ID, RUN_SPAN_ID)

    assert model.kind == OtlpSpan.SPAN_KIND_CLIENT
    assert run.kind == tool.kind == OtlpSpan.SPAN_KIND_INTERNAL
    assert (model.start_time_unix_nano, model.end_time_unix_nano) == (
        T0 + 100_000_000,
        T0 + 1_350_000_000,
    )
    assert attributes(model) == {**model_span().attributes, "fevex.span.kind": "model"}
    assert tool.status.code == OtlpStatus.STATUS_CODE_ERROR
    assert attributes(tool)["error.type"] == "TOOL_FAILED"
    assert [(event.name, event.time_unix_nano) for event in tool.events] == [
        ("fevex.tool.retry", T0 + 2_000_000_000)
    ]
    (request,) = receiver.requests
    assert receiver.content_types == ["application/x-protobuf"]
    (resource,) = request.resource_spans
    assert {pair.key: pair.value.string_value for pair in resource.resource.attributes}[
        "service.name"
    ] == "support-desk"
    assert resource.scope_spans[0].scope.name == "fevex_opentelemetry"


async def test_values_the_otlp_encoding_refuses_do_not_lose_the_batch(
    receiver: OtlpReceiver,
) -> None:
    # One lone surrogate or one integer beyond 64 bits makes the SDK's encoder fail the whole
    # request, every other span of the batch with it.
    hostile = model_span(
        name="chat \ud800",
        attributes={"gen_ai.request.model": "gpt\udfff", "fevex.huge": 2**70},
    )
    provider = otlp_provider(receiver, Compression.NoCompression)
    try:
        with pytest.raises(FevexError) as raised:
            await create_opentelemetry_exporter(provider).export([*run_trace()[1:], hostile])
        assert provider.force_flush()
    finally:
        provider.shutdown()

    assert raised.value.code == "TRACE_SPAN_INVALID"
    assert "fevex.huge" in raised.value.message
    spans = {span.name: span for span in receiver.spans()}
    assert set(spans) == {"invoke_agent support", "execute_tool lookup_account", "chat \ufffd"}
    assert attributes(spans["chat \ufffd"]) == {
        "gen_ai.request.model": "gpt\ufffd",
        "fevex.span.kind": "model",
    }
