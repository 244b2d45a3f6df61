"""Model files ragmon needs on disk: `ragmon models fetch|verify` (see docs/models.md)."""
