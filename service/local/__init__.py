"""The embedded local stack `ragmon up` starts: broker, Redis, API, workers, Prometheus, Alertmanager."""
