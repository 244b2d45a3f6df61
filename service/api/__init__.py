"""The ingestion API."""
