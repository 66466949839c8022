"""What `edgereason bench` runs: speed and accuracy of engine policies on JSONL math sets (design.md
section 5). The command's flags are in cli/bench.py; the developer scripts of the top-level
benchmarks/ are not this package."""
