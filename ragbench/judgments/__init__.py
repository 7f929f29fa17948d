"""Judgments beyond the dataset's own labels: the pool of unjudged documents a sweep retrieved, people's and an
LLM assessor's grades of it, and how far the assessor agrees with people (:mod:`.agreement`, :mod:`.assessor`)."""
