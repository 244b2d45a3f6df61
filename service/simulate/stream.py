"""The event stream: requests arriving on the scenario clock, events leaving in send order.

Each request draws its own RNG from the master one, so a request's events
depend only on the seed and its position. Events are ordered by when the app
would send them (`emit_s`), which differs from their timestamps: a trace is
exported when its request finishes, some exports lag by seconds (so the
user's thumbs can reach the API before the trace), feedback arrives when the
user clicks, review labels minutes later.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Iterator
from datetime import datetime

from service.simulate.app import RagApp, Served
from service.simulate.corpus import build_corpus
from service.simulate.feedback import review_label, user_feedback
from service.simulate.incidents import EmbeddingModelChange
from service.simulate.probes import probe_queries, replay
from service.simulate.records import FeedbackFacts, ReleaseFacts, SimEvent, TraceFacts, event_id
from service.simulate.scenario import Scenario


class EventStream:
    def __init__(self, scenario: Scenario, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("start needs a timezone")
        self.scenario = scenario
        self.start = start
        self.app = RagApp(scenario, build_corpus(scenario, start.date()), start.date())
        self._heap: list[tuple[float, int, SimEvent]] = []
        self._seq = itertools.count()
        # Probe replays draw from their own stream: a scenario's other events are the same with or without.
        self.probes = probe_queries(scenario, self.app.corpus) if scenario.probes is not None else {}
        self._probe_rng = random.Random(f"probe-stream/{scenario.seed}")
        self._next_replay_s = 0.0

    def __iter__(self) -> Iterator[SimEvent]:
        master = random.Random(f"stream/{self.scenario.seed}")
        rate, duration = self.scenario.rate, self.scenario.duration_s
        self._initial_releases(master)
        t, released_until = 0.0, -1.0
        while True:
            t += master.expovariate(rate) if self.scenario.arrival == "poisson" else 1.0 / rate
            if duration is not None and t >= duration:
                break
            self._incident_releases(master, released_until, t)
            released_until = t
            self._replays(t)
            yield from self._due(t)
            self._request(random.Random(master.getrandbits(64)), t)
        yield from self._due(float("inf"))

    def _push(self, event: SimEvent) -> None:
        heapq.heappush(self._heap, (event.emit_s, next(self._seq), event))

    def _due(self, until: float) -> Iterator[SimEvent]:
        while self._heap and self._heap[0][0] <= until:
            event = heapq.heappop(self._heap)[2]
            facts = event.facts
            if isinstance(facts, TraceFacts):
                facts.emitted = True
            elif isinstance(facts, FeedbackFacts):
                facts.before_trace = not facts.trace.emitted
            yield event

    def _release(
        self,
        rng: random.Random,
        at_s: float,
        tenant: str,
        release: str,
        variant: str,
        why: str,
        change: dict[str, str] | None = None,
    ) -> None:
        body = {"release": release, "variant": variant, "description": why, **(change or {})}
        facts = ReleaseFacts(event_id(rng.getrandbits(128)), tenant, release, variant, at_s)
        self._push(SimEvent(at_s, at_s, tenant, "release", facts.event_id, body, facts))

    def _initial_releases(self, rng: random.Random) -> None:
        cand = self.scenario.candidate
        for tenant in self.scenario.tenants:
            self._release(
                rng, 0.0, tenant.name, self.scenario.release, "production", "serving at simulation start"
            )
            if cand is not None:
                self._release(
                    rng, 0.0, tenant.name, cand.release, cand.name, "shadow candidate at simulation start"
                )

    def _incident_releases(self, rng: random.Random, after: float, until: float) -> None:
        """Release markers for incident occurrences that started in (after, until]."""
        starts = sorted(
            (start, idx, inc.release)
            for idx, inc in enumerate(self.scenario.incidents)
            if inc.release is not None
            for start in inc.starts_between(after, until)
        )
        marked: set[tuple[float, str, str]] = set()  # one release with several incidents: one marker
        for start, idx, release in starts:
            for tenant in self.scenario.tenants:
                if (
                    self.scenario.incidents[idx].applies_to(tenant.name)
                    and (start, tenant.name, release) not in marked
                ):
                    marked.add((start, tenant.name, release))
                    inc = self.scenario.incidents[idx]
                    change = None
                    if isinstance(inc, EmbeddingModelChange) and inc.declared:
                        change = {
                            "component": "embedding_model",
                            "from": self.scenario.embedding.model,
                            "to": inc.model,
                        }
                    self._release(rng, start, tenant.name, release, "production", f"deploy {release}", change)

    def _replays(self, until: float) -> None:
        """The probe replays due by `until` (scenario.probes), one per tenant every every_s from 0."""
        cfg = self.scenario.probes
        while cfg is not None and self._next_replay_s <= until:
            for tenant in self.scenario.tenants:
                probes = self.probes[tenant.name]
                for event in replay(
                    self.scenario, self.app.corpus, probes, self._next_replay_s, self._probe_rng
                ):
                    self._push(event)
            self._next_replay_s += cfg.every_s

    def _request(self, rng: random.Random, at_s: float) -> None:
        req = self.app.plan(rng, at_s)
        production = self.app.serve(rng, req, None)
        self._push_trace(rng, production)
        for item in user_feedback(
            rng, self.scenario, production.facts, production.body["answer"]["citations"]
        ):
            self._push(
                SimEvent(
                    item.at_s,
                    item.at_s,
                    production.facts.tenant,
                    item.type,
                    item.facts.event_id,
                    item.body,
                    item.facts,
                )
            )
        label = review_label(rng, self.scenario, production.facts, req.gold, req.user)
        if label is not None:
            self._push(
                SimEvent(
                    label.at_s,
                    label.at_s,
                    production.facts.tenant,
                    label.type,
                    label.facts.event_id,
                    label.body,
                    label.facts,
                )
            )
        cand = self.scenario.candidate
        if cand is not None and rng.random() < cand.share:
            self._push_trace(rng, self.app.serve(rng, req, cand))

    def _push_trace(self, rng: random.Random, served: Served) -> None:
        # Exported when the request finishes; a share of exports lag (batching exporters, retries).
        sampling = self.scenario.sampling
        emit_s = served.facts.at_s + served.facts.timings["total"] / 1000.0
        if rng.random() < sampling.trace_lag:
            emit_s += rng.uniform(*sampling.trace_lag_s)
        self._push(
            SimEvent(
                emit_s,
                served.facts.at_s,
                served.facts.tenant,
                "trace",
                served.facts.event_id,
                served.body,
                served.facts,
            )
        )


def generate_events(scenario: Scenario, start: datetime) -> Iterator[SimEvent]:
    """The scenario's events in send order; the same for the same scenario, seed and start."""
    return iter(EventStream(scenario, start))
