"""Capture policy: what happens to text before it becomes a memory (redaction, injection tags,
taint defaults, polarity, entity extraction, source refs), which namespace it belongs to (the
project namespace a checkout derives), and spotting corrections worth capturing."""
