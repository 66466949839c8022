"""Training the project's own value-head PRMs (`edgereason train-prm`)."""
