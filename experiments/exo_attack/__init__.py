"""`make attack`: the attack suite (docs/security.md). Attacks on the control and data planes of a
Mininet cluster running with TLS on, each of which must be refused and counted by the component
that refused it while an honest client's history stays linearizable."""
