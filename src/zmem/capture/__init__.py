"""Capture policy: what happens to text before it becomes a memory (redaction, injection tags,
taint defaults, polarity, entity extraction, source refs)."""
