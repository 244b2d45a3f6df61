-- Stratum `failed_check`: answers a deterministic check failed (docs/checks.md, docs/review.md).
ALTER TABLE review_item DROP CONSTRAINT review_item_stratum_check;
ALTER TABLE review_item ADD CONSTRAINT review_item_stratum_check
    CHECK (stratum IN ('blind', 'low_confidence', 'negative_feedback', 'drift', 'failed_check'));
