"""What every part of Exoskeleton shares in Python: the cluster config schema (config.py), its
generated reference (config_reference.py) and the partition table of consistent hashing
(partitions.py). The controller, the Mininet topology, the experiments and the scripts import
these from here, so none of them imports the controller just to read a config."""
