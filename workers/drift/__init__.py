"""Query and embedding drift: MMD² between a reference and a rolling current window."""
