"""The synthetic knowledge base and its users, built deterministically from the seed.

Per tenant, product and topic there is one public article per locale (a few
translations are missing, so the gold for a pt/pl user is then the English
article, which the locale predicate legitimately excludes: a small baseline
false-exclusion rate, as in production), some articles are stale (older than
the recency cutoff), and some topics have a staff-only internal note (gold
that ordinary users are not entitled to: never a false exclusion).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import cached_property

from service.simulate.scenario import Scenario, TenantConfig
from service.simulate.topics import PRODUCTS, TOPICS, Topic

MISSING_TRANSLATION = 0.06
STALE_ARTICLE = 0.05
INTERNAL_NOTE = 0.3
STAFF_USERS = 0.2
RECENCY_DAYS = 365  # the app's recency predicate: updated_at >= start - 1 year


@dataclass(frozen=True)
class Doc:
    id: str
    tenant: str
    product: str
    topic: str
    intent: str
    locale: str
    access_group: str
    updated_at: str  # RFC 3339 date
    text: str

    @cached_property
    def metadata(self) -> dict[str, str]:
        """Shared by every use of the document: payloads copy it, evaluation only reads it."""
        return {
            "tenant": self.tenant,
            "access_group": self.access_group,
            "locale": self.locale,
            "product": self.product,
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True)
class User:
    id: str
    tenant: str
    locale: str
    groups: tuple[str, ...]
    products: tuple[str, ...]


@dataclass
class TenantCorpus:
    name: str
    products: tuple[str, ...]
    locales: tuple[str, ...]
    docs: list[Doc] = field(default_factory=list)
    users: list[User] = field(default_factory=list)
    by_key: dict[tuple[str, str], list[Doc]] = field(default_factory=dict)  # (product, topic)
    by_intent: dict[str, list[Doc]] = field(default_factory=dict)

    def add(self, doc: Doc) -> None:
        self.docs.append(doc)
        self.by_key.setdefault((doc.product, doc.topic), []).append(doc)
        self.by_intent.setdefault(doc.intent, []).append(doc)


@dataclass
class Corpus:
    tenants: dict[str, TenantCorpus]
    recency_cutoff: str

    def gold(self, tenant: str, product: str, topic: str, locale: str) -> list[Doc]:
        """Documents that answer the question, whether or not the caller may see them."""
        docs = self.tenants[tenant].by_key.get((product, topic), [])
        public = [d for d in docs if d.access_group == "public"]
        localized = [d for d in public if d.locale == locale] or [d for d in public if d.locale == "en"]
        return localized + [d for d in docs if d.access_group == "staff"]


def _doc_text(topic: Topic, product: str, numbers: dict[str, int], locale: str, staff: bool) -> str:
    facts = " ".join(f.format(product=product, **numbers) for f in topic.facts)
    if staff:
        return (
            f"Internal note - {product} {topic.title}. {facts} Escalate unresolved {topic.title.lower()} cases "
            f"to tier 2 within {numbers['n3']} hours."
        )
    return f"{product} - {topic.title} ({locale}). {facts}"


def _numbers(rng: random.Random) -> dict[str, int]:
    return {"n1": rng.randint(2, 30), "n2": rng.randint(2, 60), "n3": rng.randint(3, 90)}


def _add_topic_docs(tc: TenantCorpus, rng: random.Random, product: str, topic: Topic, today: date) -> None:
    numbers = _numbers(rng)
    base = f"{tc.name}-{product}-{topic.name}"
    for locale in tc.locales:
        if locale != "en" and rng.random() < MISSING_TRANSLATION:
            continue
        stale = rng.random() < STALE_ARTICLE
        age = rng.randint(RECENCY_DAYS + 30, 3 * RECENCY_DAYS) if stale else rng.randint(5, RECENCY_DAYS - 30)
        tc.add(
            Doc(
                f"{base}-{locale}",
                tc.name,
                product,
                topic.name,
                topic.intent,
                locale,
                "public",
                (today - timedelta(days=age)).isoformat(),
                _doc_text(topic, product, numbers, locale, False),
            )
        )
    if rng.random() < INTERNAL_NOTE:
        age = rng.randint(5, RECENCY_DAYS - 30)
        tc.add(
            Doc(
                f"{base}-internal",
                tc.name,
                product,
                topic.name,
                topic.intent,
                "en",
                "staff",
                (today - timedelta(days=age)).isoformat(),
                _doc_text(topic, product, numbers, "en", True),
            )
        )


def _users(tc: TenantCorpus, locales: tuple[str, ...], rng: random.Random, count: int) -> list[User]:
    users = []
    for k in range(count):
        groups = ("public", "staff") if rng.random() < STAFF_USERS else ("public",)
        n_products = 2 if rng.random() < 0.25 and len(tc.products) > 1 else 1
        users.append(
            User(
                f"{tc.name}-u{k:04d}",
                tc.name,
                rng.choice(locales),
                groups,
                tuple(rng.sample(tc.products, n_products)),
            )
        )
    return users


def _tenant_products(cfg: TenantConfig, index: int) -> tuple[str, ...]:
    if cfg.products:
        return tuple(dict.fromkeys(cfg.products))
    # Neighbouring tenants share some products, so a cross-tenant leak can be on-topic.
    return tuple(PRODUCTS[(index + k) % len(PRODUCTS)] for k in range(3))


def build_corpus(scenario: Scenario, today: date) -> Corpus:
    """Documents dated relative to `today` (the scenario's start date), the same for a given seed."""
    tenants = {}
    for index, cfg in enumerate(scenario.tenants):
        rng = random.Random(f"corpus/{scenario.seed}/{cfg.name}")
        # English articles always exist: they are the fallback when a translation is missing.
        tc = TenantCorpus(cfg.name, _tenant_products(cfg, index), tuple(dict.fromkeys(["en", *cfg.locales])))
        for product in tc.products:
            for topic in TOPICS:
                _add_topic_docs(tc, rng, product, topic, today)
        tc.users = _users(tc, tuple(cfg.locales), rng, cfg.users)
        tenants[cfg.name] = tc
    cutoff = (today - timedelta(days=RECENCY_DAYS)).isoformat()
    return Corpus(tenants, cutoff)
