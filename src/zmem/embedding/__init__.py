"""Embedding profiles: which model turns text into vectors, resolved from ZMEM_EMBED_PROFILE."""
