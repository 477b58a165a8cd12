"""LLM judge runs: prompt, client, orchestration."""
