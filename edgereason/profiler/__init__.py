"""`edgereason memory-profile`'s run (run.py): the modelled search checked, both models measured through their
backend's profiling objects, a sample search (sample.py), the split chosen (memory/split.py) and plotted (plot.py)."""
