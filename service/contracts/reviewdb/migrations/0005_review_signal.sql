-- Implicit user signals of reviewed traces (docs/review.md, "Implicit signals against labels"): the first
-- time each signal was seen for a trace that has a review item. The review worker writes them: from
-- feedback arriving after the item was queued, and from feedback stashed with the trace before it was.
CREATE TABLE review_signal (
    tenant    text NOT NULL,
    trace_id  text NOT NULL,
    signal    text NOT NULL CHECK (signal IN
        ('thumbs_down', 'thumbs_up', 'regenerate', 'copy', 'edit', 'short_dwell', 'reformulation')),
    first_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant, trace_id, signal)
);
