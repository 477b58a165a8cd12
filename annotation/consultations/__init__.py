"""Consultations on disputed rubric items: opening, the blind vote, the discussion, the resolution."""
