"""Measuring recall quality: the deterministic fixture corpus and gold set, the runner and its
metrics, the self-corpus probe, public-corpus adapters (LoCoMo, LongMemEval) and the weight
tuner. Everything here reads through the public MemoryStore API, passively."""
