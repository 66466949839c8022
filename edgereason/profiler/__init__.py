"""`edgereason memory-profile`'s run (run.py): the modelled search checked, both models measured
through their backend's profiler probes (backends/*/profiler_probes.py), a sample search
(sample.py), the split chosen (memory/split.py) and plotted (plot.py)."""
