"""Imports and exports: questions and responses in, the consensus dataset out.

`questions.questions_import` and `responses.responses_import` validate a whole JSONL
file before writing any of it; `export.consensus_rows` and `export.consensus_export`
stream the consensus dataset. The management commands and the API views call these
and nothing else.
"""
