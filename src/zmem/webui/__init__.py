"""The web inspector (`zmem ui`): server-rendered pages over MemoryStore to see, search and
fix what is stored, behind a one-run token and CSRF checks."""
