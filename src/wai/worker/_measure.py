"""What a worker runtime adds to wai's metrics (:mod:`wai._metrics`): its committed
outcomes as they are reported, and its own gauges when an exporter collects."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence

from wai._context import AttemptState
from wai._followups import Applied
from wai._job import JobState
from wai._metrics import METRICS, GaugeSample, Labels
from wai._outcomes import Outcome
from wai._tally import OUTCOME_EVENTS

__all__ = ["record_committed", "runtime_gauges"]


def record_committed(batch: Sequence[tuple[Outcome, AttemptState]], applied: Applied) -> None:
    """Count the outcomes of ``batch`` that ``applied`` wrote, with their attempt's
    duration; how long the batch's oldest outcome waited for its commit; the dead letters."""
    written = applied.written
    if not written:
        return
    now = time.monotonic()
    outcomes = METRICS.outcomes
    # Counted per label set, each metric's lock taken once per batch.
    counts: dict[tuple[str, Labels], int] = {}
    durations: dict[Labels, list[float]] = {}
    oldest = now
    for outcome, state in batch:
        if outcome.job_id not in written:
            continue  # a stale attempt's outcome matched nothing
        if outcome.event == "snoozed" and outcome.state is JobState.AVAILABLE:
            continue  # a worker's stop put the job back, attempt refunded: not its outcome
        if outcome.event not in outcomes:
            continue
        labels = (state.row.queue, state.kind)
        key = (outcome.event, labels)
        counts[key] = counts.get(key, 0) + 1
        finished = state.finished if state.finished is not None else now
        durations.setdefault((*labels, OUTCOME_EVENTS[outcome.event]), []).append(
            finished - state.started
        )
        oldest = min(oldest, finished)
    for (event, labels), n in counts.items():
        outcomes[event].add(labels, n)
    for labels, seconds in durations.items():
        METRICS.duration.observe_many(labels, seconds)
    METRICS.finalizer_wait.observe((), now - oldest)  # once a batch: its longest wait
    if applied.dead_lettered:
        states = {outcome.job_id: state for outcome, state in batch}
        for job_id, reason in applied.dead_lettered.items():
            state = states.get(job_id)
            if state is not None:
                METRICS.dead_lettered.add((state.row.queue, state.kind, reason))


def runtime_gauges(
    *,
    in_flight: Callable[[], Mapping[str, int]],
    last_beat_at: Callable[[], float | None],
    started_at: float,
    instance_id: str,
    is_leader: Callable[[], bool],
) -> Callable[[], Iterator[GaugeSample]]:
    """The gauge source of one runtime: attempts in flight per queue, heartbeat lag,
    leadership."""

    def samples() -> Iterator[GaugeSample]:
        for queue, count in in_flight().items():
            yield GaugeSample("wai.worker.in_flight", (queue,), float(count))
        beat = last_beat_at()
        yield GaugeSample("wai.heartbeat.lag", (), time.monotonic() - (beat or started_at))
        yield GaugeSample("wai.leader", (instance_id,), 1.0 if is_leader() else 0.0)

    return samples
