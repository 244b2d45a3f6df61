-- Review queue, human labels and the sampler's bookkeeping (docs/review.md).
-- The review worker is the only writer of review_item; the API writes labels.

CREATE TABLE review_item (
    id                      bigserial PRIMARY KEY,
    tenant                  text NOT NULL,
    trace_id                text NOT NULL,
    stratum                 text NOT NULL CHECK (stratum IN ('blind', 'low_confidence', 'negative_feedback')),
    reason                  text NOT NULL,
    inclusion_probability   double precision NOT NULL CHECK (inclusion_probability > 0 AND inclusion_probability <= 1),
    queued_at               timestamptz NOT NULL DEFAULT now(),
    queued_day              date NOT NULL,
    trace_timestamp         timestamptz NOT NULL,
    variant                 text NOT NULL,
    release                 text,
    intent                  text,
    content                 jsonb NOT NULL,          -- query, documents, answer, citations: redacted by the API
    faithfulness_score      double precision,
    faithfulness_threshold  double precision,
    faithfulness_outcome    text,
    falsely_excluded        boolean,
    exclusion_gold_source   text,
    scorer_version          text,                    -- model source@revision of the faithfulness score
    policy_version          text,                    -- the sampler's policy (hash of its config section)
    config_version          text,                    -- the whole ragmon config file (hash)
    reviews_wanted          smallint NOT NULL DEFAULT 1 CHECK (reviews_wanted BETWEEN 1 AND 2),
    reviews_done            smallint NOT NULL DEFAULT 0,
    UNIQUE (tenant, trace_id)                         -- a trace is never queued twice
);
-- The next item for a reviewer: open items of a tenant in queue order.
CREATE INDEX review_item_open ON review_item (tenant, id) WHERE reviews_done < reviews_wanted;
CREATE INDEX review_item_stratum_day ON review_item (tenant, stratum, queued_day);

-- Items queued and items fully reviewed per tenant, kept in the writers' transactions, so the page
-- reads the queue's size in O(1) instead of counting a million rows on every render.
CREATE TABLE review_tenant_stats (
    tenant    text PRIMARY KEY,
    queued    bigint NOT NULL DEFAULT 0,
    completed bigint NOT NULL DEFAULT 0
);

CREATE TABLE review_label (
    id          bigserial PRIMARY KEY,
    item_id     bigint NOT NULL REFERENCES review_item (id),
    tenant      text NOT NULL,
    trace_id    text NOT NULL,
    reviewer    text NOT NULL,
    faithful    boolean,
    answerable  boolean,
    gold_ids    text[] NOT NULL DEFAULT '{}',
    reason      text,
    note        text,
    labelled_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (item_id, reviewer)
);
CREATE INDEX review_label_tenant ON review_label (tenant, labelled_at);
CREATE INDEX review_label_reviewer ON review_label (tenant, reviewer, labelled_at);

-- Items admitted, and selected but refused for capacity (overflow), per tenant, day and stratum.
-- The effective inclusion probability of a day's items is scaled by admitted / (admitted + overflow).
CREATE TABLE review_quota (
    tenant   text NOT NULL,
    day      date NOT NULL,
    stratum  text NOT NULL,
    admitted integer NOT NULL DEFAULT 0,
    overflow bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, day, stratum)
);

-- The sampler's consumed offsets, written in the same transaction as its effects: a redelivered
-- record is skipped, so counters here (overflow, score totals) never count twice.
CREATE TABLE review_consumer_offset (
    topic       text NOT NULL,
    partition   integer NOT NULL,
    next_offset bigint NOT NULL,
    PRIMARY KEY (topic, partition)
);

-- Every scored production trace, aggregated: the unlabelled side of prediction-powered inference.
CREATE TABLE review_score_totals (
    tenant            text NOT NULL,
    day               date NOT NULL,
    scored            bigint NOT NULL DEFAULT 0,
    predicted_faithful bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, day)
);
