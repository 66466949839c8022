"""Plumbing every layer may use: files written whole (files.py), append-only JSONL (jsonl.py), text
from outside made valid Unicode (text.py), and stop signals (interrupts.py)."""
