"""Where a processor runs and how its run is ended: in a host process the worker can kill, or in-process."""
