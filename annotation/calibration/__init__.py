"""Calibration: an expert answers golden tasks before real work; the golden set it draws from."""
