"""Speed of the engine beside its peers on the same strands; see ``docs/performance.md``."""
