"""The processor end to end without Kafka: Event objects in, metrics and score records out."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from service.contracts import FeedbackBody, Topics
from service.contracts.scores import FaithfulnessScoreEvent
from service.contracts.topics import H_EVENT_ID, H_EVENT_TYPE, H_TENANT
from tests.workers.faithfulness.faithfulness_events import CollectingEmitter, trace
from tests.workers.faithfulness.hhem_builder import TinyHHEM
from workers.faithfulness.config import FaithfulnessConfig
from workers.faithfulness.loader import LoadedModel
from workers.faithfulness.metrics import FaithfulnessMetrics
from workers.faithfulness.processor import FaithfulnessProcessor, ScorerUnavailable
from workers.faithfulness.scorer import HHEMScorer
from workers.faithfulness.sentences import split_sentences

DOCS = ["The refund window is 30 days from delivery.", "Premium plans include phone support on weekdays."]
ANSWER = "You can return it within 30 days. Phone support is available on weekends. Invoices come by email."
PREFIX = "ragmon_faithfulness_"


class Harness:
    def __init__(
        self, processor: FaithfulnessProcessor, registry: CollectorRegistry, emitter: CollectingEmitter
    ):
        self.processor, self.registry, self.emitter = processor, registry, emitter

    def value(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(PREFIX + name, labels) or 0.0

    def events(self) -> list[FaithfulnessScoreEvent]:
        return [FaithfulnessScoreEvent.model_validate_json(r.value) for r in self.emitter.records]


@pytest.fixture
def harness(tiny_hhem: TinyHHEM) -> Callable[..., Harness]:
    def build(**settings: Any) -> Harness:
        config = FaithfulnessConfig.model_validate(
            {"model": str(tiny_hhem.model_dir), "sample_rate": 1.0, **settings}
        )
        registry, emitter = CollectorRegistry(), CollectingEmitter()
        processor = FaithfulnessProcessor(
            config, emitter, FaithfulnessMetrics(registry), Topics("t1"), clock=lambda: 0.0
        )
        return Harness(processor, registry, emitter)

    return build


def test_a_trace_is_scored_and_its_score_event_emitted(
    harness: Callable[..., Harness], tiny_hhem: TinyHHEM
) -> None:
    h = harness()
    event = trace("t-1", ANSWER, DOCS, release="v7", intent="billing")
    assert h.processor.process([event]) == []
    expected = tiny_hhem.reference_scores([("\n\n".join(DOCS), ANSWER)])[0]
    (record,) = h.emitter.records
    assert record.topic == "t1.scores" and record.key == b"acme/req-t-1"
    scored = h.events()[0]
    assert dict(record.headers)[H_EVENT_ID] == str(scored.event_id).encode()
    assert (
        dict(record.headers)[H_EVENT_TYPE] == b"faithfulness_score"
        and dict(record.headers)[H_TENANT] == b"acme"
    )
    assert scored.score == pytest.approx(expected, abs=1e-5)
    assert (scored.outcome, scored.mode, scored.threshold, scored.below_threshold) == (
        "scored",
        "answer",
        0.5,
        expected < 0.5,
    )
    assert (scored.trace_id, scored.request_id, scored.variant, scored.release, scored.intent) == (
        "t-1",
        "req-t-1",
        "production",
        "v7",
        "billing",
    )
    assert scored.source_event_id == event.stored.id and scored.model.revision.startswith("sha256:")
    assert scored.truncation is not None and scored.truncation.truncated_tokens == 0
    labels = {"tenant": "acme", "variant": "production"}
    scores = {**labels, "intent": "billing"}  # the score histogram is kept per intent (docs/intents.md)
    assert h.value("scored_total", **labels) == 1 and h.value("score_ratio_count", **scores) == 1
    assert h.value("score_ratio_sum", **scores) == pytest.approx(expected, abs=1e-5)
    assert h.value("pairs_total", source="model") == 1 and h.value("scored_tokens_total", **labels) > 0
    # What did not happen reads 0, not "no data", from the first trace on.
    for name, extra in (("skipped_total", {"reason": "over_budget"}), ("below_threshold_total", {})):
        assert h.registry.get_sample_value(PREFIX + name, {**labels, **extra}) is not None


def test_a_redelivered_trace_gets_the_same_event_id(harness: Callable[..., Harness]) -> None:
    h = harness()
    h.processor.process([trace("t-1", ANSWER, DOCS)])
    h.processor.process([trace("t-1", ANSWER, DOCS)])
    first, second = h.events()
    assert first.event_id == second.event_id and first.score == second.score
    assert h.value("pairs_total", source="cache") == 1  # the identical pair was not run again


@pytest.mark.parametrize(
    ("answer", "refused", "reason"),
    [
        ("I cannot answer that from the documents.", True, "refused"),
        ("", False, "empty"),
        (" ... ", False, "empty"),
    ],
)
def test_refusals_and_empty_answers_are_no_claims_never_scored(
    harness: Callable[..., Harness], answer: str, refused: bool, reason: str
) -> None:
    h = harness()
    h.processor.process([trace("t-1", answer, DOCS, refused=refused)])
    labels = {"tenant": "acme", "variant": "production"}
    assert h.value("no_claims_total", reason=reason, **labels) == 1
    assert h.value("eligible_total", **labels) == 0 and h.value("scored_total", **labels) == 0
    assert h.value("score_ratio_count", **labels, intent="none") == 0
    assert h.value("pairs_total", source="model") == 0
    (event,) = h.events()  # sampled: the shadow comparison sees that this side had nothing to score
    assert (event.outcome, event.no_claims_reason, event.score, event.below_threshold) == (
        "no_claims",
        reason,
        None,
        None,
    )


def test_sentence_mode_reports_the_unsupported_sentences(
    harness: Callable[..., Harness], loaded: LoadedModel
) -> None:
    scorer = HHEMScorer(loaded)
    sentences = split_sentences(ANSWER)
    scores = [s.score for s in scorer.score([("\n\n".join(DOCS), s) for s in sentences])]
    assert len(sentences) == 3 and len(set(scores)) == 3
    # A threshold between the scores: exactly the sentences below it are unsupported.
    threshold = sorted(scores)[1]
    expected = [i for i, score in enumerate(scores) if score < threshold]
    h = harness(mode="sentences", threshold=threshold, min_supported_fraction=0.9)
    h.processor.process([trace("t-1", ANSWER, DOCS)])
    (event,) = h.events()
    assert [u.index for u in event.unsupported_sentences] == expected
    assert [u.text for u in event.unsupported_sentences] == [sentences[i] for i in expected]
    assert [u.score for u in event.unsupported_sentences] == pytest.approx(
        [scores[i] for i in expected], abs=1e-6
    )
    assert (event.sentences_total, event.sentences_supported) == (3, 2)
    assert event.score == pytest.approx(2 / 3) and event.below_threshold is True
    assert h.value("pairs_total", source="model") == 3
    assert h.value("below_threshold_total", tenant="acme", variant="production") == 1


def test_truncation_follows_the_budget_and_is_recorded(
    harness: Callable[..., Harness], tiny_hhem: TinyHHEM, loaded: LoadedModel
) -> None:
    first_size, second_size = (
        len(e.ids) for e in loaded.tokenizer.encode_batch(DOCS, add_special_tokens=False)
    )
    h = harness(premise_token_budget=first_size + second_size - 1)
    h.processor.process([trace("t-1", ANSWER, DOCS)])
    (event,) = h.events()
    assert event.truncation is not None
    assert (event.truncation.documents_total, event.truncation.documents_kept) == (2, 1)
    assert (event.truncation.tokens_kept, event.truncation.truncated_tokens) == (first_size, second_size)
    # The score is the one of the premise the budget kept.
    assert event.score == pytest.approx(tiny_hhem.reference_scores([(DOCS[0], ANSWER)])[0], abs=1e-5)
    labels = {"tenant": "acme", "variant": "production"}
    assert h.value("truncated_total", **labels) == 1
    assert h.value("truncated_tokens_total", **labels) == event.truncation.truncated_tokens > 0


def test_sampling_scores_a_production_trace_with_its_shadow_twin(harness: Callable[..., Harness]) -> None:
    h = harness(sample_rate=0.4)
    events = []
    for i in range(40):
        events.append(trace(f"p-{i}", f"Answer {i}.", DOCS, request_id=f"req-{i}"))
        events.append(
            trace(f"s-{i}", f"Candidate answer {i}.", DOCS, request_id=f"req-{i}", variant="rerank-v2")
        )
    h.processor.process(events)
    scored = {(e.request_id, e.variant) for e in h.events()}
    requests = {request for request, _ in scored}
    assert 0 < len(requests) < 40
    assert scored == {(r, v) for r in requests for v in ("production", "rerank-v2")}
    again = harness(sample_rate=0.4)
    again.processor.process(events)
    assert {(e.request_id, e.variant) for e in again.events()} == scored  # another worker, the same sample
    for variant in ("production", "rerank-v2"):
        labels = {"tenant": "acme", "variant": variant}
        assert h.value("skipped_total", reason="sampled_out", **labels) == 40 - len(requests)
        assert h.value("eligible_total", **labels) == 40


def test_the_budget_skips_and_every_trace_is_accounted_for(harness: Callable[..., Harness]) -> None:
    h = harness(pairs_per_second=1, burst_seconds=3, max_hypothesis_tokens=16)
    events = [trace(f"t-{i}", f"Answer number {i}.", DOCS) for i in range(5)]
    events += [
        trace("refused", "No.", DOCS, refused=True),
        trace("no-docs", "An answer.", []),
        trace("long", " ".join(["word"] * 40) + ".", DOCS),
    ]
    h.processor.process(events)
    labels = {"tenant": "acme", "variant": "production"}
    skipped = {
        r: h.value("skipped_total", reason=r, **labels)
        for r in ("over_budget", "no_context", "hypothesis_too_long")
    }
    assert skipped == {"over_budget": 2, "no_context": 1, "hypothesis_too_long": 1}
    assert h.value("scored_total", **labels) == 3
    assert h.value("traces_total", **labels) == 8
    assert h.value("eligible_total", **labels) == 7
    assert h.value("traces_total", **labels) == h.value("eligible_total", **labels) + h.value(
        "no_claims_total", reason="refused", **labels
    )


def test_thresholds_are_per_tenant(harness: Callable[..., Harness]) -> None:
    h = harness(threshold=0.5, tenant_thresholds={"strict": 1.0, "lenient": 0.0})
    h.processor.process(
        [trace("t-1", ANSWER, DOCS, tenant="strict"), trace("t-2", ANSWER, DOCS, tenant="lenient")]
    )
    assert h.value("below_threshold_total", tenant="strict", variant="production") == 1
    assert h.value("below_threshold_total", tenant="lenient", variant="production") == 0
    assert {e.tenant: e.threshold for e in h.events()} == {"strict": 1.0, "lenient": 0.0}
    assert h.value("threshold_ratio", tenant="strict") == 1.0


def test_variants_beyond_the_cap_are_labelled_other(harness: Callable[..., Harness]) -> None:
    h = harness(max_variants=1)
    h.processor.process(
        [trace(f"t-{v}", ANSWER, DOCS, variant=v) for v in ("production", "cand-a", "cand-b")]
    )
    assert h.value("scored_total", tenant="acme", variant="cand-a") == 1
    assert h.value("scored_total", tenant="acme", variant="other") == 1
    assert {e.variant for e in h.events()} == {
        "production",
        "cand-a",
        "cand-b",
    }  # the event keeps the real name


def test_a_failed_forward_pass_counts_an_error_and_nothing_else(
    harness: Callable[..., Harness], monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness()

    def out_of_memory(self: HHEMScorer, rows: list[list[int]]) -> list[float]:
        raise RuntimeError("simulated: not enough memory")

    monkeypatch.setattr(HHEMScorer, "_forward", out_of_memory)
    with pytest.raises(RuntimeError, match="simulated"):
        h.processor.process([trace("t-1", ANSWER, DOCS), trace("t-2", "", DOCS)])
    labels = {"tenant": "acme", "variant": "production"}
    assert h.value("errors_total", stage="inference", **labels) == 1
    assert (
        h.value("traces_total", **labels) == 0 and h.value("no_claims_total", reason="empty", **labels) == 0
    )
    assert h.emitter.records == []  # the runtime retries the whole batch


def test_other_event_types_are_rejected(harness: Callable[..., Harness]) -> None:
    # Bodies arrive validated by the runtime's decode; the processor only refuses a type it does not read.
    h = harness()
    feedback_body = FeedbackBody(trace_id="t-1", kind="thumbs", value=True)
    wrong_type = trace("t-1", ANSWER, DOCS)
    wrong_type.stored = wrong_type.stored.model_copy(
        update={"type": "feedback", "body": feedback_body.model_dump()}
    )
    wrong_type.body = feedback_body
    rejections = h.processor.process([wrong_type, trace("t-3", ANSWER, DOCS)])
    assert [(r.event, r.reason) for r in rejections] == [(wrong_type, "unexpected_event_type")]
    assert rejections[0].detail.startswith("type: 'feedback'")
    assert len(h.events()) == 1


def test_a_model_that_cannot_load_leaves_the_worker_up_not_ready_and_retrying(
    harness: Callable[..., Harness], tiny_hhem: TinyHHEM, tmp_path: Path
) -> None:
    target = tmp_path / "models" / "hhem"
    h = harness(model=str(target), load_retry_seconds=30)
    readiness = h.processor.readiness()
    assert not readiness.ready
    assert str(target) in readiness.reason and "Fix: download the model there" in readiness.reason
    assert h.value("scorer_up") == 0 and h.value("model_load_failures_total") == 1
    with pytest.raises(ScorerUnavailable, match="is not a directory"):
        h.processor.process([trace("t-1", ANSWER, DOCS)])
    h.processor.tick(1000.0)  # schedules the retry on the runtime's clock
    shutil.copytree(tiny_hhem.model_dir, target)
    h.processor.tick(1029.0)
    assert not h.processor.readiness().ready and h.value("model_load_failures_total") == 1
    h.processor.tick(1030.0)
    assert h.processor.readiness().ready and h.value("scorer_up") == 1
    h.processor.process([trace("t-1", ANSWER, DOCS)])
    assert h.value("scored_total", tenant="acme", variant="production") == 1


def test_a_corrupt_checkpoint_is_reported_not_raised(
    harness: Callable[..., Harness], hhem_copy: Callable[[str], Path]
) -> None:
    directory = hhem_copy("corrupt")
    (directory / "model.safetensors").write_bytes(b"\x00" * 64)
    h = harness(model=str(directory))
    reason = h.processor.readiness().reason
    assert f"loading {str(directory)!r} failed" in reason and "Fix: re-download the checkpoint" in reason
    assert json.loads((directory / "config.json").read_text())["foundation"]  # only the weights were damaged


def test_an_errored_trace_is_neither_scored_nor_eligible(harness: Callable[..., Harness]) -> None:
    """A failed request (a provider outage) must not read as an unfaithful answer or as lost coverage."""
    h = harness()
    h.processor.process([trace("t-9", ANSWER, DOCS, error={"type": "timeout", "retryable": True})])
    labels = {"tenant": "acme", "variant": "production"}
    assert h.value("traces_total", **labels) == 1 and h.value("errored_traces_total", **labels) == 1
    assert h.value("eligible_total", **labels) == 0 and h.value("scored_total", **labels) == 0
    assert sum(h.value("no_claims_total", reason=r, **labels) for r in ("refused", "empty")) == 0
    assert h.value("pairs_total", source="model") == 0 and h.events() == []


def _phantom(trace_id: str) -> Any:
    """An answer citing a document it was never given: the deterministic check citations_known fails."""
    event = trace(trace_id, "You can return it within 30 days.", DOCS)
    event.body.answer.citations = ["kb-404"]
    return event


def test_answers_that_fail_a_check_get_the_budget_first(harness: Callable[..., Harness]) -> None:
    h = harness(pairs_per_second=1, burst_seconds=3)
    events = [trace(f"t-{i}", f"Answer number {i}.", DOCS) for i in range(5)] + [_phantom("phantom")]
    h.processor.process(events)
    scored = {e.trace_id for e in h.events()}
    assert "phantom" in scored and len(scored) == 3  # the last of the batch, planned first
    labels = {"tenant": "acme", "variant": "production"}
    assert h.value("skipped_total", reason="over_budget", **labels) == 3


def test_with_skip_an_answer_that_failed_a_check_costs_no_model_time(harness: Callable[..., Harness]) -> None:
    h = harness(failed_checks="skip")
    h.processor.process([_phantom("phantom"), trace("ok", ANSWER, DOCS)])
    labels = {"tenant": "acme", "variant": "production"}
    assert h.value("skipped_total", reason="failed_check", **labels) == 1
    assert h.value("scored_total", **labels) == 1 and {e.trace_id for e in h.events()} == {"ok"}


def test_scores_are_counted_per_intent_capped_to_the_configured_set(harness: Callable[..., Harness]) -> None:
    """A configured intent is its own label value, any other name `other`, no intent `none`: the
    per-intent faithfulness guardrail's series stay bounded whatever the app sends."""
    h = harness(intents=["billing"])
    events = [
        trace("t-1", ANSWER, DOCS, intent="billing"),
        trace("t-2", ANSWER, DOCS, intent="made_up_by_the_client"),
        trace("t-3", ANSWER, DOCS, intent=None),
    ]
    assert h.processor.process(events) == []
    labels = {"tenant": "acme", "variant": "production"}
    counts = {i: h.value("score_ratio_count", **labels, intent=i) for i in ("billing", "other", "none")}
    assert counts == {"billing": 1, "other": 1, "none": 1}
    assert (
        h.registry.get_sample_value(
            PREFIX + "score_ratio_count", {**labels, "intent": "made_up_by_the_client"}
        )
        is None
    )
