"""The review sampler: fills each tenant's human-review queue (docs/review.md)."""
