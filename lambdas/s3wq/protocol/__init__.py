"""The correctness core: how a group's lock is taken, kept, completed and given back, and what its objects hold."""
