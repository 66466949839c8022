"""`edgereason bench`: speed and accuracy of engine policies on JSONL math sets (design.md section 5)."""
