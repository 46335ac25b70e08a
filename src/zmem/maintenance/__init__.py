"""Store maintenance: jobs that rewrite derived state in bulk (vectors now; consolidate,
organize, backup and sweep later), in bounded transactions (bounded.py) so a writer beside them
waits for one batch at most and a killed job resumes, each batch all or nothing."""
