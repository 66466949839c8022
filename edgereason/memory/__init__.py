"""Memory: the KV budget, its split between generator and PRM, and the profiles that record it."""

from edgereason.memory.device import default_device_id
from edgereason.memory.profile_store import find_profile, verifier_id
from edgereason.memory.size import parse_size

__all__ = ["default_device_id", "find_profile", "parse_size", "verifier_id"]
