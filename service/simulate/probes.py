"""Probe replays in the simulator (docs/probes.md): the app replays a fixed probe set every `every_s`.

Each tenant's probes are fixed by the seed: probe i is one question (intent, topic, product, a user of
the tenant) with its gold. A replay retrieves each probe's top k with a random stream seeded by the probe
and the version serving it (embedding model, index version), so a replay under an unchanged version
returns the same ids. Under another version than the scenario's first (an `embedding_model_change`
incident, declared by its release or not) the gold stays on top but the other neighbours are drawn at
random from a wider top 3k: a new model's neighbourhood overlaps the old one's only in part (below
the alert's 0.7 floor in the `probes` scenario). The traces carry the probe mark and go,
like the app's, through POST /v1/events; `ragmon simulate probe-set` writes the set for `ragmon probes add`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from service.simulate.corpus import Corpus
from service.simulate.incidents import Active
from service.simulate.records import ProbeFacts, SimEvent, event_id
from service.simulate.retrieval import retrieve_candidates
from service.simulate.scenario import Scenario
from service.simulate.topics import INTENTS, QUERY_CLOSERS, QUERY_OPENERS, TOPICS_BY_INTENT, Topic


@dataclass(frozen=True)
class ProbeQuery:
    tenant: str
    query_id: str
    query: str
    topic: Topic
    product: str
    user_index: int
    gold_ids: tuple[str, ...]

    def line(self, probe_set: str) -> dict[str, Any]:
        """One line of a probe file (`ragmon probes add`)."""
        out: dict[str, Any] = {"set": probe_set, "query_id": self.query_id, "query": self.query}
        if self.gold_ids:
            out["gold_ids"] = list(self.gold_ids)
        return out


def probe_queries(scenario: Scenario, corpus: Corpus) -> dict[str, list[ProbeQuery]]:
    """Each tenant's fixed probe set."""
    cfg = scenario.probes
    assert cfg is not None
    out: dict[str, list[ProbeQuery]] = {}
    for tenant in scenario.tenants:
        tc = corpus.tenants[tenant.name]
        rng = random.Random(f"probes/{scenario.seed}/{tenant.name}")
        probes = []
        for i in range(cfg.queries):
            topic = rng.choice(TOPICS_BY_INTENT[rng.choice(INTENTS)])
            user_index = rng.randrange(len(tc.users))
            product = rng.choice(tc.users[user_index].products)
            query = rng.choice(QUERY_OPENERS) + rng.choice(topic.queries).format(product=product)
            query += rng.choice(QUERY_CLOSERS)
            gold = corpus.gold(tenant.name, product, topic.name, tc.users[user_index].locale)
            probes.append(
                ProbeQuery(
                    tenant.name, f"p{i:03d}", query, topic, product, user_index, tuple(d.id for d in gold)
                )
            )
        out[tenant.name] = probes
    return out


def replay(
    scenario: Scenario, corpus: Corpus, probes: list[ProbeQuery], at_s: float, rng: random.Random
) -> list[SimEvent]:
    """One replay of a tenant's probe set at `at_s`, under the version serving it then."""
    cfg = scenario.probes
    assert cfg is not None
    if not probes:
        return []
    tenant = probes[0].tenant
    change = Active.at(scenario.incidents, at_s, tenant).embedding_change()
    model = change.model if change and change.index_follows else scenario.embedding.model
    index = f"{cfg.index_version}+{model}" if change and change.index_follows else cfg.index_version
    tc = corpus.tenants[tenant]
    events = []
    for probe in probes:
        seeded = random.Random(f"probe-retrieval/{scenario.seed}/{tenant}/{probe.query_id}/{model}/{index}")
        user = tc.users[probe.user_index]
        gold = set(probe.gold_ids)
        if (model, index) == (scenario.embedding.model, cfg.index_version):
            top = retrieve_candidates(seeded, tc, user, probe.product, probe.topic, gold, cfg.k)
        else:
            wide = retrieve_candidates(seeded, tc, user, probe.product, probe.topic, gold, 3 * cfg.k)
            kept = [c for c in wide[: cfg.k] if c.doc.id in gold]
            others = [c for c in wide if c.doc.id not in gold]
            drawn = seeded.sample(others, min(len(others), cfg.k - len(kept)))
            top = kept + sorted(drawn, key=lambda c: (-c.score, c.doc.id))
        ids = [c.doc.id for c in top]
        body = {
            "trace_id": f"probe-{rng.getrandbits(64):016x}",
            "request_id": f"probe-{rng.getrandbits(64):016x}",
            "release": scenario.release,
            "query": {"text": probe.query, "embedding_model": model},
            "retrieval": {
                "documents": [{"id": c.doc.id, "text": c.doc.text, "score": c.score} for c in top],
                "index_embedding_model": model,
                "index_version": index,
            },
            "probe": {"set": cfg.set, "query_id": probe.query_id},
        }
        facts = ProbeFacts(
            event_id(rng.getrandbits(128)), tenant, cfg.set, probe.query_id, model, index, at_s, ids
        )
        events.append(SimEvent(at_s, at_s, tenant, "trace", facts.event_id, body, facts))
    return events
