"""EdgeReason: PRM-guided test-time search with a generator and a verifier on one device."""

# llama.cpp's library loads before numpy can: beside some numpy builds (seen with the numpy 2.5 that torch images
# ship) loading it second made llama.cpp crash while loading a model.
import llama_cpp.llama_cpp  # noqa: F401

__version__ = "0.1.0"
