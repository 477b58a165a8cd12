"""Reveal after submission: an expert compares their submitted labels with the judge's and may revise once."""
