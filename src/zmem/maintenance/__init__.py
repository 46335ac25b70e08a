"""Store maintenance: jobs that rewrite derived state in bulk (vectors now; consolidate,
organize, backup and sweep later), each in one transaction so a crash leaves the store as it
was."""
