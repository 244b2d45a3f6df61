-- Labels leave PostgreSQL for Kafka through an outbox (written in the label's transaction,
-- relayed until the broker acknowledges), plus reviewer assignments, golden-set stamps and
-- stored calibration results.

CREATE TABLE label_outbox (
    id         bigserial PRIMARY KEY,
    label_id   bigint NOT NULL REFERENCES review_label (id),
    event_id   uuid NOT NULL UNIQUE,
    tenant     text NOT NULL,
    event      jsonb NOT NULL,       -- the stored `label` event, exactly as produced
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz,
    attempts   integer NOT NULL DEFAULT 0
);
CREATE INDEX label_outbox_unsent ON label_outbox (id) WHERE sent_at IS NULL;

-- Who is looking at which item: an item is offered to one reviewer at a time until the lease ends.
CREATE TABLE review_assignment (
    item_id     bigint NOT NULL REFERENCES review_item (id),
    reviewer    text NOT NULL,
    assigned_at timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (item_id, reviewer)
);

-- What a label was given under: the golden set is stamped with these.
ALTER TABLE review_label ADD COLUMN scorer_version text;
ALTER TABLE review_label ADD COLUMN policy_version text;
ALTER TABLE review_label ADD COLUMN config_version text;

CREATE TABLE calibration_result (
    id          bigserial PRIMARY KEY,
    tenant      text NOT NULL,
    kind        text NOT NULL,
    computed_at timestamptz NOT NULL DEFAULT now(),
    result      jsonb NOT NULL
);
