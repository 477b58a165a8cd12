"""Shared knowledge of a project: the case library (agreed readings of disputed items) and the FAQ.

Search over both is `annotation.library.search` (Chinese substring and bigram matching,
ranked by pg_trgm similarity on PostgreSQL).
"""
