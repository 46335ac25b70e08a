"""The read path: lanes, fusion and scoring, diversity, link expansion, lineage unfold, the
retrieval debugger and rendering. Pure ranking logic over rows that db/recall.py fetches."""
