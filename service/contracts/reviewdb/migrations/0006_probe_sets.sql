-- Probe sets for embedding and index migrations (docs/probes.md).
-- What a tenant registered (`ragmon probes add`): kept like the golden set, people typed it.
CREATE TABLE probe_query (
    tenant text NOT NULL,
    probe_set text NOT NULL,
    query_id text NOT NULL,
    query_text text NOT NULL,
    gold_ids text[],
    added_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, probe_set, query_id)
);

-- Every replayed probe trace the probes worker consumed: one row per event id (a redelivered trace is
-- stored once). embedding_model / index_version are '' when the trace named none.
CREATE TABLE probe_result (
    id bigserial PRIMARY KEY,
    tenant text NOT NULL,
    event_id uuid NOT NULL,
    probe_set text NOT NULL,
    query_id text NOT NULL,
    variant text NOT NULL,
    embedding_model text NOT NULL,
    index_version text NOT NULL,
    retrieved_ids text[] NOT NULL,
    observed_at timestamptz NOT NULL,
    UNIQUE (tenant, event_id)
);
CREATE INDEX probe_result_version ON probe_result
    (tenant, probe_set, embedding_model, index_version, query_id, observed_at);

-- The versions whose results are a baseline: a query's baseline is its first production result of that
-- version at or after pinned_at. how: the set's first version, one that followed a declared change, or
-- pinned by hand (`ragmon probes pin`). The current baseline of a set is its latest accepted_at.
CREATE TABLE probe_baseline (
    tenant text NOT NULL,
    probe_set text NOT NULL,
    embedding_model text NOT NULL,
    index_version text NOT NULL,
    pinned_at timestamptz NOT NULL,
    accepted_at timestamptz NOT NULL,
    how text NOT NULL CHECK (how IN ('first', 'declared', 'pinned')),
    PRIMARY KEY (tenant, probe_set, embedding_model, index_version)
);

-- Declared changes: release markers of the tenant, as the probes worker consumed them.
CREATE TABLE probe_change (
    tenant text NOT NULL,
    event_id uuid NOT NULL,
    release text NOT NULL,
    variant text NOT NULL,
    changed_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, event_id)
);
