"""Command-line interface: `edgereason solve|chat|bench|memory-profile|models`."""
