"""Host adapters and hook verbs: per-host payload normalizers (events), what each host accepts
on stdout (emit), the ops ring and sidecars under the data dir, and the verbs that recall for
a hook. The resident process that serves them warm is zmem.resident. Modules the hook client
loads before it knows it has work import only the standard library."""
