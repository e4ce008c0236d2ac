"""N-gram lattice rescoring drafts (placeholder until the engine lands)."""
class LatticeDrafter:
    pass
