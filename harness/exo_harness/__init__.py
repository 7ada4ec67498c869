"""The test and measurement harness around the Exoskeleton client (`exoskeleton`): what drives
a cluster and what records it, kept apart from the client library itself.

    exo_harness.workload   the workload worker (python -m exo_harness.workload), Zipf GET/PUT mix
    exo_harness.keyspace   key names by popularity rank, Zipf sampler, hot-set swap
    exo_harness.impair     ImpairedIO: loss/delay/duplication/reordering around a client's I/O
    exo_harness.recorder   RecordingIO: records a client's operations from its I/O into a History
    exo_harness.history    History: the recorded operations, JSON Lines, for the linearizability checker

Submodules are not imported here: the workload needs numpy, the recorder only the wire format.
"""
