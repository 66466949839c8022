"""EdgeReason: PRM-guided test-time search with a generator and a verifier on one device."""

__version__ = "0.1.0"
