"""Human review: the store's queries, calibration statistics, the golden set (docs/review.md)."""
