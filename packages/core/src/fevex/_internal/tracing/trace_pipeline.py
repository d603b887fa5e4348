"""Spans built and exported off the run path.

The event sink hands every committed event, with the run's snapshot, to
:meth:`TracePipeline.record`: it appends them to a bounded queue and, at most once per
burst, schedules the pipeline's processing on the loop; it never waits, and when the
queue is full it drops the event and counts it. Processing turns the queued events into
spans (:class:`~fevex._internal.tracing.span_builder.SpanBuilder`), and a background task hands
the finished spans to every exporter in batches: ``export_interval`` seconds after the
first span of a batch is ready, or at once when ``queue_size`` spans wait, one round at a
time:

- an ``async def export`` is awaited in a task of its own, abandoned (cancelled) after
  ``export_timeout``;
- a plain ``export`` runs in a daemon thread of its exporter's own, so it never holds up the
  loop (nor the interpreter's exit); one that has not returned after ``export_timeout``
  fails that round, and the exporter's next rounds fail at once until it returns.

An exporter that raises or runs late is counted, never retried, and never reaches a run.
:meth:`TracePipeline.flush` processes what is queued, waits for the export rounds that
takes (each bounded by ``export_timeout``) and reports what happened since the last report.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from fevex._internal.tracing.span_builder import SpanBuilder
from fevex.errors import FevexConfigurationError
from fevex.events import RunEvent
from fevex.observability.configuration import Observability
from fevex.observability.report import ExportFailure, ObservabilityReport
from fevex.observability.spans import Span, TraceExporter
from fevex.runtime.records import AgentRun

__all__ = ["TracePipeline", "open_pipeline"]

logger = logging.getLogger("fevex")

EXPORTERS_SWITCH = "FEVEX_TRACE_EXPORTERS"
_MAX_FAILURES = 100


def open_pipeline(observability: Observability | None) -> TracePipeline | None:
    """The app's pipeline: the exporters ``observability`` gives, or those
    ``FEVEX_TRACE_EXPORTERS`` names when it gives none; ``None`` without any exporter."""
    settings = observability or Observability()
    exporters = settings.exporters
    if exporters is None:
        exporters = exporters_from_environment()
    if not exporters:
        return None
    return TracePipeline(
        exporters,
        builder=SpanBuilder(settings.content, settings.redact),
        queue_size=settings.queue_size,
        export_timeout=float(settings.export_timeout),
        export_interval=float(settings.export_interval),
    )


def exporters_from_environment() -> list[TraceExporter]:
    names = [name.strip() for name in os.environ.get(EXPORTERS_SWITCH, "").split(",")]
    names = [name for name in names if name]
    if not names:
        return []
    # Imported here: plugin discovery (pluggy, entry points) is paid only when used.
    from fevex.plugins.discovery import open_trace_exporter

    exporters = []
    for name in names:
        exporter = open_trace_exporter(name)
        if not callable(getattr(exporter, "export", None)):
            raise FevexConfigurationError(
                "INVALID_OBSERVABILITY",
                f"The trace exporter plugin {name!r} ({EXPORTERS_SWITCH}) built "
                f"{type(exporter).__name__}, which has no export(spans) method.",
            )
        exporters.append(exporter)
    return exporters


# Stream-layer events: the spans read whole steps from model.completed.
_STREAMED = frozenset(
    ("model.output.delta", "model.tool_input.delta", "model.block.started", "model.block.stopped")
)


class _ExportThread:
    """One daemon thread running one exporter's plain ``export`` calls, one at a time."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def submit(self, call: Callable[[], Any]) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._jobs.put((call, loop, future))
        return future

    def stop(self) -> None:
        self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            call, loop, future = job
            try:
                outcome: tuple[Any, BaseException | None] = (call(), None)
            except BaseException as error:  # the exporter's, handed to the loop as it is
                outcome = (None, error)
            with contextlib.suppress(RuntimeError):  # the loop was closed meanwhile
                loop.call_soon_threadsafe(_settle, future, *outcome)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class _Exporter:
    """One exporter as the pipeline calls it."""

    def __init__(self, exporter: TraceExporter) -> None:
        self.exporter = exporter
        self.name = type(exporter).__name__
        self.is_async = inspect.iscoroutinefunction(exporter.export)
        self._thread: _ExportThread | None = None
        # A plain export that ran past its timeout and has not returned yet.
        self._late: asyncio.Future[Any] | None = None

    async def send(self, spans: Sequence[Span], timeout: float) -> ExportFailure | None:
        """Export ``spans``; the failure, if the call raised or ran past ``timeout``."""
        try:
            if self.is_async:
                await _bounded(asyncio.ensure_future(self.exporter.export(spans)), timeout)  # type: ignore[arg-type]
                return None
            late = self._late
            if late is not None and not late.done():
                raise TimeoutError("its previous export has not returned yet")
            if self._thread is None:
                self._thread = _ExportThread(f"fevex-trace-export-{self.name}")
            future = self._thread.submit(lambda: self.exporter.export(spans))
            try:
                result = await _bounded(future, timeout, cancel=False)
            except TimeoutError:
                self._late = future
                future.add_done_callback(_consume)
                raise
            if inspect.isawaitable(result):
                await _bounded(asyncio.ensure_future(result), timeout)
            return None
        except Exception as error:
            message = str(error) if not isinstance(error, TimeoutError) or str(error) else ""
            return ExportFailure(
                self.name,
                type(error).__name__,
                (message or f"export took longer than {timeout} s")[:500],
                len(spans),
            )

    def stop(self) -> None:
        if self._thread is not None:
            self._thread.stop()


async def _bounded(future: asyncio.Future[Any], timeout: float, *, cancel: bool = True) -> Any:
    """``future``'s result within ``timeout`` seconds, else ``TimeoutError``; a late future
    is cancelled (when ``cancel``) and never awaited, so an exporter that ignores its
    cancellation cannot hold the pipeline."""
    done, _ = await asyncio.wait((future,), timeout=timeout)
    if not done:
        if cancel:
            future.cancel()
            future.add_done_callback(_consume)
        raise TimeoutError("")
    return future.result()


def _consume(future: asyncio.Future[Any]) -> None:
    # A late export's outcome has nobody to reach; reading it keeps asyncio quiet.
    if not future.cancelled():
        future.exception()


class TracePipeline:
    """The bounded queue, the span builder and the background export of one app."""

    def __init__(
        self,
        exporters: Sequence[TraceExporter],
        *,
        builder: SpanBuilder,
        queue_size: int,
        export_timeout: float,
        export_interval: float,
    ) -> None:
        self._exporters = [_Exporter(exporter) for exporter in exporters]
        self._builder = builder
        self._capacity = queue_size
        self._timeout = export_timeout
        self._interval = export_interval
        self._queue: deque[tuple[AgentRun, RunEvent]] = deque()
        # The loop the processing of queued events is scheduled on, until it runs.
        self._scheduled: asyncio.AbstractEventLoop | None = None
        self._ready: list[Span] = []
        self._exporting: asyncio.Task[None] | None = None
        # The timer that starts the next export round, and its loop.
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        # Blocking twins used from several threads run one loop each: one builder at a time.
        self._lock = threading.Lock()
        self._spans = 0
        self._dropped_events = 0
        self._dropped_spans = 0
        self._failed = 0
        self._failures: list[ExportFailure] = []

    def record(self, run: AgentRun, event: RunEvent) -> None:
        """Queue one committed event of ``run``; never waits (see the module)."""
        if event.type in _STREAMED:
            return  # no span needs streamed text, arguments or block bounds
        if len(self._queue) >= self._capacity:
            self._dropped_events += 1
            return
        self._queue.append((run, event))
        loop = asyncio.get_running_loop()
        if self._scheduled is not loop:
            # Also when another loop has it scheduled: that loop may never run again (a
            # blocking twin's loop between two calls).
            self._scheduled = loop
            loop.call_soon(self._process)

    def _process(self) -> None:
        self._scheduled = None
        builder = self._builder
        ready = self._ready
        with self._lock:
            while self._queue:
                run, event = self._queue.popleft()
                try:
                    spans = builder.add(run, event)
                except Exception:
                    # A payload the builder cannot read loses its spans, never the run.
                    self._dropped_events += 1
                    logger.warning(
                        "Run %s: no span for event %s (%s)",
                        run.id,
                        event.sequence,
                        event.type,
                        exc_info=True,
                        extra={"run_id": run.id},
                    )
                    continue
                if not spans:
                    continue
                room = self._capacity - len(ready)
                if len(spans) > room:
                    self._dropped_spans += len(spans) - max(room, 0)
                    spans = spans[: max(room, 0)]
                ready.extend(spans)
        self._plan_export()

    def _plan_export(self) -> None:
        """Start the next export round now when many spans wait, else in ``interval``;
        nothing while a round is under way (its end plans the next)."""
        if not self._ready or not (self._exporting is None or self._exporting.done()):
            return
        loop = asyncio.get_running_loop()
        if len(self._ready) >= self._capacity // 2:
            self._start_export()
        elif self._timer is None or self._timer_loop is not loop:
            # A timer of another loop may never fire (a blocking twin's, between calls).
            self._timer = loop.call_later(self._interval, self._start_export)
            self._timer_loop = loop

    def _start_export(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        if self._ready and (self._exporting is None or self._exporting.done()):
            self._exporting = asyncio.get_running_loop().create_task(self._export())

    async def _export(self) -> None:
        batch, self._ready = self._ready, []
        try:
            failures = await asyncio.gather(
                *(exporter.send(batch, self._timeout) for exporter in self._exporters)
            )
        except asyncio.CancelledError:
            # The loop is shutting down (asyncio.run's end): the batch is lost, counted.
            self._dropped_spans += len(batch)
            raise
        self._spans += len(batch)
        for failure in failures:
            if failure is not None:
                self._failed_export(failure)
        self._exporting = None
        self._plan_export()

    def _failed_export(self, failure: ExportFailure) -> None:
        self._failed += 1
        if len(self._failures) < _MAX_FAILURES:
            self._failures.append(failure)
        logger.warning(
            "Trace exporter %s failed with %s; %d spans were not exported by it",
            failure.exporter,
            failure.error_type,
            failure.spans,
            extra={"exporter": failure.exporter, "error_type": failure.error_type},
        )

    async def flush(self) -> ObservabilityReport:
        """Build and export everything recorded so far, then report (see the module)."""
        while True:
            self._process()
            self._start_export()
            exporting = self._exporting
            if exporting is None or exporting.done():
                if not self._queue and not self._ready:
                    break
                continue
            if exporting.get_loop() is not asyncio.get_running_loop():
                break  # another thread's loop exports it
            await asyncio.wait((exporting,))
        return self._report()

    def _report(self) -> ObservabilityReport:
        builder = self._builder
        report = ObservabilityReport(
            spans=self._spans,
            dropped_events=self._dropped_events,
            dropped_spans=self._dropped_spans,
            failed_exports=self._failed,
            content_dropped=builder.content_dropped,
            failures=tuple(self._failures),
        )
        self._spans = self._dropped_events = self._dropped_spans = self._failed = 0
        builder.content_dropped = 0
        self._failures = []
        return report

    async def close(self) -> ObservabilityReport:
        """Flush, then let the exporters' threads end."""
        report = await self.flush()
        for exporter in self._exporters:
            exporter.stop()
        return report
