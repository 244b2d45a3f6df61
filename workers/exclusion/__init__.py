"""Exclusion worker: metadata-filter false exclusions from production samples, with the cause attributed."""
