"""The consumer runtime shared by every worker: decode, dedupe, process, emit, commit."""
