"""Imports and exports: questions and responses in, the consensus dataset out.

`questions.questions_import` and `responses.responses_import` validate a whole JSONL
file, read line by line, and write all of it or nothing; `export.consensus_rows` and
`export.consensus_export` stream the consensus dataset. The management commands and the API views call these
and nothing else.
"""
