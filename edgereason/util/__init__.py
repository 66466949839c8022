"""Plumbing every layer may use: files written whole (files.py), append-only JSONL (jsonl.py), files
read back against a schema (schema.py), text from outside made valid Unicode (text.py), and stop
signals (interrupts.py)."""
