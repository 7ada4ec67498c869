"""Fault-injection campaign for Exoskeleton (docs/chaos.md): workers that record client
histories (`worker`), faults (`faults`), the campaign driver (`campaign`), measurements over
histories (`metrics`) and the per-key linearizability checker (`linearizability`,
docs/linearizability.md)."""
