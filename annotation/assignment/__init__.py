"""Leasing tasks to experts: eligibility, the random draw, lease expiry."""
