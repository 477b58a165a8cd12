"""Payments: price rules, the ledger and statements (built in the Payments issue)."""
