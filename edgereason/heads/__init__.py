"""Value heads: the file format and scoring (value_head.py), what a head takes from its backbone's
file (backbone.py), and the heads that ship with the package (the .safetensors/.json files beside
this module, made by `edgereason train-prm`)."""
