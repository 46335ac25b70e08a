"""Host integration: per-host payload normalizers, the host-independent hook verbs, the ops
ring and sidecars under the data dir, namespace derivation and the warm resident process.
Modules the hook client loads before it knows it has work import only the standard library."""
