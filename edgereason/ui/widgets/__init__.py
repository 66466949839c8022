"""The chat screen's widgets; each only applies what the app hands it."""
