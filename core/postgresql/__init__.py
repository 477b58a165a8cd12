"""Django's PostgreSQL backend with server-side parameters that never refuse a long query (see base)."""
