"""Writes to the domain. Plain, typed functions with keyword-only arguments; the only place
that checks permissions and opens transactions."""
