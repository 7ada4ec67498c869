"""`make bench`'s data-plane benchmark (issue 12): the cache node, the db node and the client
beside raw packet I/O (a DPDK reflector), memcached and in-process RocksDB, each server pinned
to one core and exo-loadgen to the other, joined by a bare veth pair (no switch), plus Open
vSwitch for context. Writes results/bench_dataplane.json and .png and prints a table.

    net.py        the namespaces and links the bench creates (and always removes)
    procs.py      processes started in a namespace, pinned to a core, always stopped
    loadgen.py    one exo-loadgen run at one rate -> its totals
    search.py     the loss rule: highest answered rate with loss <= 1%, by bracketing runs
    servers.py    each server under test: how to start it, fill it and aim the generator at it
    evidence.py   perf: CPU time and system calls per request, the hot path's profile
    cases.py      the cases in one run, in order
    report.py     ratios against targets, the JSON, the table and the PNG
"""
