"""Airlock's PostgreSQL backend: Django's, with a cheaper pool check (base.py)."""
