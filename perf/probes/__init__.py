"""Quick probes of one question each (bucket padding, trace occupancy, a plain client), apart from the sweeps."""
