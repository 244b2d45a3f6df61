"""The simulated RAG application: one user request in, one trace per variant out."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cached_property
from typing import Any

from service.simulate.corpus import Corpus, Doc, TenantCorpus, User
from service.simulate.encoder import FakeEncoder
from service.simulate.generation import (
    AnswerOutcome,
    UsageOutcome,
    completion_tokens,
    compose_answer,
    stage_timings,
    token_usage,
)
from service.simulate.incidents import STAGES, Active, release_at
from service.simulate.records import TraceFacts, event_id
from service.simulate.retrieval import (
    ExclusionTruth,
    Scored,
    candidate_payload,
    entitlement_filters,
    exclusion_truth,
    relevance_filters,
    retrieve_candidates,
    survivors,
)
from service.simulate.scenario import CandidateConfig, ModelConfig, Scenario
from service.simulate.topics import (
    INTENTS,
    OFF_TOPIC_INTENT,
    OFF_TOPIC_QUERIES,
    OFF_TOPIC_SLOTS,
    QUERY_CLOSERS,
    QUERY_OPENERS,
    TOPICS_BY_INTENT,
    Topic,
)

SESSION_IDLE_S = 600.0
SESSION_CONTINUE = 0.7
MIN_RETRIEVAL_DEPTH = 20


_SENTENCES = re.compile(r"(?<=\.)\s+")


@dataclass
class Request:
    at_s: float
    tenant: TenantCorpus
    user: User
    session_id: str
    request_id: str
    active: Active
    release: str
    intent: str
    topic: Topic | None
    product: str
    query: str
    gold: list[Doc]
    embedding: list[float] | None
    embedding_model: str | None

    @cached_property
    def gold_ids(self) -> set[str]:
        return {d.id for d in self.gold}


@dataclass
class Retrieved:
    relevance: list[dict[str, Any]]
    candidates: list[Scored]  # what the exclusion sample shows
    context: list[Scored]
    leak: bool
    truth: ExclusionTruth


@dataclass
class Generated:
    answer: AnswerOutcome
    model: str
    usage: UsageOutcome
    timings: dict[str, float]


@dataclass
class Served:
    body: dict[str, Any]
    facts: TraceFacts


class RagApp:
    def __init__(self, scenario: Scenario, corpus: Corpus, today: date) -> None:
        self.scenario = scenario
        self.corpus = corpus
        self.future = (today + timedelta(days=30)).isoformat()
        self.tenant_names = [t.name for t in scenario.tenants]
        self.tenant_weights = [t.weight for t in scenario.tenants]
        self.sample_rates = {t.name: t.sample_rate or scenario.sampling.sample_rate for t in scenario.tenants}
        weights = scenario.intents or dict.fromkeys(INTENTS, 1.0)
        self.intents = [i for i in INTENTS if weights.get(i, 0) > 0]
        self.intent_weights = [weights[i] for i in self.intents]
        self.models = {m.name: m for m in scenario.models}
        self.model_weights = [m.weight for m in scenario.models]
        self.encoders: dict[tuple[str, int], FakeEncoder] = {}
        self.sessions: dict[str, tuple[str, float]] = {}
        self.last_asked: dict[
            str, tuple[str, str, Topic | None, str]
        ] = {}  # user -> session, intent, topic, product

    def plan(self, rng: random.Random, at_s: float) -> Request:
        """Who asks what: the part of a request every variant shares."""
        tenant = rng.choices(self.tenant_names, self.tenant_weights)[0]
        tc = self.corpus.tenants[tenant]
        user = rng.choice(tc.users)
        active = Active.at(self.scenario.incidents, at_s, tenant)
        release = release_at(self.scenario.incidents, self.scenario.release, at_s, tenant)
        session_id = self._session(rng, user, at_s)
        request_id = f"req-{rng.getrandbits(64):016x}"
        again = self._asked_again(rng, active, user.id, session_id)
        if again is not None:  # the same question in other words: same intent, topic and product
            intent, topic, product = again
            template = rng.choice(topic.queries).format(product=product)
            query = rng.choice(QUERY_OPENERS) + template + rng.choice(QUERY_CLOSERS)
            gold = self.corpus.gold(tenant, product, topic.name, user.locale)
            topic_key = topic.name
        elif rng.random() < active.topic_shift_share():
            which = rng.randrange(len(OFF_TOPIC_QUERIES))
            slots = {k: rng.choice(v) for k, v in OFF_TOPIC_SLOTS.items()}
            query, topic, intent, gold = OFF_TOPIC_QUERIES[which].format(**slots), None, OFF_TOPIC_INTENT, []
            topic_key, product = f"off-topic/{which}", user.products[0]
        else:
            intent = rng.choices(self.intents, self.intent_weights)[0]
            topic = rng.choice(TOPICS_BY_INTENT[intent])
            product = rng.choice(user.products)
            template = rng.choice(topic.queries).format(product=product)
            query = rng.choice(QUERY_OPENERS) + template + rng.choice(QUERY_CLOSERS)
            gold = self.corpus.gold(tenant, product, topic.name, user.locale)
            topic_key = topic.name
        embedding, model = self._embed(rng, active, topic_key)
        self.last_asked[user.id] = (session_id, intent, topic, product)
        return Request(
            at_s,
            tc,
            user,
            session_id,
            request_id,
            active,
            release,
            intent,
            topic,
            product,
            query,
            gold,
            embedding,
            model,
        )

    def _asked_again(
        self, rng: random.Random, active: Active, user_id: str, session_id: str
    ) -> tuple[str, Topic, str] | None:
        """Under a `reformulations` incident, a share of the follow-ups to that intent's answers ask the
        previous question again (no random draw otherwise, so other scenarios keep their streams)."""
        last = self.last_asked.get(user_id)
        if last is None or last[0] != session_id or last[2] is None:
            return None
        share = active.reformulation_share(last[1])
        if share <= 0 or rng.random() >= share:
            return None
        return last[1], last[2], last[3]

    def _session(self, rng: random.Random, user: User, at_s: float) -> str:
        current = self.sessions.get(user.id)
        if current and at_s - current[1] < SESSION_IDLE_S and rng.random() < SESSION_CONTINUE:
            session_id = current[0]
        else:
            session_id = f"sess-{rng.getrandbits(48):012x}"
        self.sessions[user.id] = (session_id, at_s)
        return session_id

    def _embed(
        self, rng: random.Random, active: Active, topic_key: str
    ) -> tuple[list[float] | None, str | None]:
        cfg = self.scenario.embedding
        if rng.random() >= self.scenario.sampling.embedding:
            return None, None
        change = active.embedding_change()
        model, dim = (change.model, change.dim) if change else (cfg.model, cfg.dim)
        encoder = self.encoders.get((model, dim))
        if encoder is None:
            encoder = self.encoders[(model, dim)] = FakeEncoder(model, dim, cfg.noise)
        return encoder.encode(topic_key, rng.getrandbits(63)), model

    def serve(self, rng: random.Random, req: Request, candidate: CandidateConfig | None) -> Served:
        """One variant's answer to the request (production when `candidate` is None)."""
        variant = candidate.name if candidate else "production"
        got = self._retrieve(rng, req, variant)
        gen = self._generate(rng, req, got, candidate, variant)
        error = self._error(rng, req, variant)
        body: dict[str, Any] = {
            "trace_id": f"{rng.getrandbits(128):032x}",
            "request_id": req.request_id,
            "variant": variant,
            "release": candidate.release if candidate else req.release,
            "sample_rate": self.sample_rates[req.tenant.name],
            "session_id": req.session_id,
            "intent": req.intent,
            "query": {"text": req.query},
            "retrieval": {
                "documents": [
                    {"id": c.doc.id, "text": c.doc.text, "score": c.score, "metadata": dict(c.doc.metadata)}
                    for c in got.context
                ],
                "filters": {"entitlement": entitlement_filters(req.user), "relevance": got.relevance},
            },
            "answer": gen.answer.body,
            "timings": gen.timings,
            "usage": gen.usage.body,
        }
        swap = req.active.generation_change(variant)
        if swap is not None and (swap.share >= 1 or rng.random() < swap.share):  # draws only while active
            body["usage"] = {**body["usage"], "model": swap.model}
        if req.embedding is not None:
            body["query"].update(embedding=req.embedding, embedding_model=req.embedding_model)
            change = req.active.embedding_change()
            index_model = change.model if change and change.index_follows else self.scenario.embedding.model
            body["retrieval"]["index_embedding_model"] = index_model
        if error is not None:  # the request failed: no answer (its retrieval and prompt tokens stay)
            body["error"] = error
            body["answer"] = {"text": "", "refused": False, "citations": []}
            body["usage"] = {**gen.usage.body, "tokens": {"prompt": gen.usage.tokens.get("prompt", 0)}}
            body["usage"].pop("cost_usd", None)
        else:
            reason = self._finish(rng, req, variant, body["answer"])  # may cut the text: before the copy
            body["answer"] = {**body["answer"], "finish_reason": reason}
            self._phantom(rng, req, variant, body["answer"], {c.doc.id for c in got.context})
        sampled, gold_in_sample = self._attach_sample(rng, body, got, req)
        facts = TraceFacts(
            event_id=event_id(rng.getrandbits(128)),
            trace_id=body["trace_id"],
            request_id=req.request_id,
            tenant=req.tenant.name,
            variant=variant,
            release=body["release"],
            intent=req.intent,
            phase=req.active.phase,
            at_s=req.at_s,
            sample_rate=body["sample_rate"],
            model=gen.model,
            tokens=gen.usage.tokens,
            cost_usd=gen.usage.cost_usd,
            timings=gen.timings,
            refused=gen.answer.refused,
            faithful=gen.answer.faithful,
            gold_in_context=gen.answer.gold_in_context,
            off_topic=req.topic is None,
            leak=got.leak,
            cited=bool(gen.answer.body["citations"]),
            exclusion=got.truth,
            sampled=sampled,
            gold_in_sample=gold_in_sample,
            embedding_model=req.embedding_model,
            embedding_dim=len(req.embedding) if req.embedding is not None else None,
            error=None if error is None else (error["stage"], error["type"]),
            finish_reason=body["answer"].get("finish_reason"),
        )
        if error is not None:
            facts.tokens = dict(body["usage"]["tokens"])
            facts.cost_usd = None
            facts.refused, facts.faithful, facts.cited = False, None, False
        return Served(body, facts)

    @staticmethod
    def _error(rng: random.Random, req: Request, variant: str) -> dict[str, Any] | None:
        """A failed request while a provider outage is active (draws only then: other streams unchanged)."""
        outage = req.active.outage(variant)
        if outage is None or rng.random() >= outage.share:
            return None
        kinds = sorted(outage.types)
        kind = rng.choices(kinds, [outage.types[k] for k in kinds])[0]
        error: dict[str, Any] = {"type": kind, "stage": outage.stage, "retryable": kind != "content_filter"}
        error["provider_request_id"] = f"req_{rng.getrandbits(64):016x}"
        return error

    @staticmethod
    def _phantom(
        rng: random.Random, req: Request, variant: str, answer: dict[str, Any], given: set[str]
    ) -> None:
        """While a phantom-citations incident is on, a share of answers also cites a document of the tenant
        that was not retrieved (draws only then)."""
        share = req.active.phantom_share(variant)
        if share > 0 and not answer["refused"] and rng.random() < share:
            others = [d.id for d in req.tenant.docs if d.id not in given]
            if others:
                answer["citations"] = [*answer["citations"], rng.choice(others)]

    @staticmethod
    def _finish(rng: random.Random, req: Request, variant: str, answer: dict[str, Any]) -> str:
        """`stop`, or `length` (the text cut after half its sentences) for a share of answers while a
        truncation spike is on."""
        share = req.active.truncation_share(variant)
        if share > 0 and not answer["refused"] and rng.random() < share:
            # cut after half of its sentences (at least one): a shorter answer, still what the context says
            sentences = _SENTENCES.split(answer["text"])
            answer["text"] = " ".join(sentences[: max(1, len(sentences) // 2)])
            return "length"
        return "stop"

    def _retrieve(self, rng: random.Random, req: Request, variant: str) -> Retrieved:
        sampling = self.scenario.sampling
        relevance = relevance_filters(
            rng,
            req.user,
            req.intent,
            self.corpus.recency_cutoff,
            self.future,
            req.active.filter_break(variant),
        )
        depth = max(sampling.exclusion_candidates, MIN_RETRIEVAL_DEPTH)
        candidates = retrieve_candidates(
            rng, req.tenant, req.user, req.product, req.topic, req.gold_ids, depth
        )
        context = survivors(candidates, relevance, sampling.context_docs)
        leak = rng.random() < req.active.leak_share(variant)
        if leak:
            context = [Scored(self._leaked_doc(rng, req), round(rng.uniform(0.6, 0.75), 4)), *context]
        shown = candidates[: sampling.exclusion_candidates]
        return Retrieved(
            relevance, shown, context, leak, exclusion_truth(shown, req.gold, req.user, relevance)
        )

    def _generate(
        self,
        rng: random.Random,
        req: Request,
        got: Retrieved,
        candidate: CandidateConfig | None,
        variant: str,
    ) -> Generated:
        unfaithful_rate = max(
            req.active.unfaithful_share(variant, req.intent),
            candidate.unfaithful_for(req.intent) if candidate else 0.0,
        )
        unfaithful = rng.random() < unfaithful_rate
        refuse = self._refuses(rng, req, got.context, candidate, variant)
        figures = req.active.unfaithful_figures(variant, req.intent)
        answer = compose_answer(rng, got.context, req.gold_ids, req.product, refuse, unfaithful, figures)
        model = self._model(rng, candidate)
        usage = token_usage(
            model,
            req.query,
            got.context,
            answer.body["text"],
            req.active.cost_factor(variant) * (candidate.cost_factor if candidate else 1.0),
        )
        factors = {stage: req.active.stage_factor(variant, stage) for stage in STAGES}
        timings = stage_timings(
            rng,
            completion_tokens(answer.body["text"]),
            factors,
            candidate.latency_factor if candidate else 1.0,
        )
        return Generated(answer, model.name, usage, timings)

    def _attach_sample(
        self, rng: random.Random, body: dict[str, Any], got: Retrieved, req: Request
    ) -> tuple[bool, bool]:
        """The exclusion sample on a share of traffic, with gold ids on a share of those."""
        sampling = self.scenario.sampling
        sampled = rng.random() < sampling.exclusion_sample
        gold_in_sample = sampled and rng.random() < sampling.gold_ids_in_sample
        if sampled:
            sample: dict[str, Any] = {"candidates": candidate_payload(got.candidates)}
            if gold_in_sample:
                sample["gold_ids"] = sorted(req.gold_ids)
            body["retrieval"]["exclusion_sample"] = sample
        return sampled, gold_in_sample

    def _refuses(
        self,
        rng: random.Random,
        req: Request,
        context: list[Scored],
        candidate: CandidateConfig | None,
        variant: str,
    ) -> bool:
        if not context:
            p = 0.9
        elif req.topic is None:
            p = 0.6
        elif not any(c.doc.id in req.gold_ids for c in context):
            p = 0.5  # the right document was filtered out: the model often says it does not know
        else:
            p = candidate.refusal_for(req.intent) if candidate else self.scenario.sampling.refusal_rate
        if rng.random() < p:
            return True
        # A stale corpus: this intent's documents went missing, so the app refuses answerable queries too.
        # The extra draw only while one is active, so scenarios without it replay the same stream.
        stale = req.active.stale_share(variant, req.intent)
        return stale > 0 and rng.random() < stale

    def _model(self, rng: random.Random, candidate: CandidateConfig | None) -> ModelConfig:
        if candidate and candidate.model:
            return self.models[candidate.model]
        return rng.choices(self.scenario.models, self.model_weights)[0]

    def _leaked_doc(self, rng: random.Random, req: Request) -> Doc:
        """Another tenant's document on the same topic, or a staff note for a non-staff user."""
        others = [t for name, t in self.corpus.tenants.items() if name != req.tenant.name]
        if "staff" not in req.user.groups:
            notes = [d for d in req.tenant.docs if d.access_group == "staff"]
            if notes and (not others or rng.random() < 0.5):
                return rng.choice(notes)
        if not others:
            # One tenant and a staff user: nothing in this corpus is off-limits to them, so invent a foreign doc.
            doc = rng.choice(req.tenant.docs)
            return Doc(
                f"foreign-{doc.id}",
                "foreign",
                doc.product,
                doc.topic,
                doc.intent,
                doc.locale,
                "public",
                doc.updated_at,
                doc.text,
            )
        other = rng.choice(others)
        same_topic = [d for d in other.docs if req.topic is not None and d.topic == req.topic.name]
        return rng.choice(same_topic or other.docs)
