"""Drafts, atomic idempotent submission, and per-item consensus."""
