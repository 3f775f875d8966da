"""make bench: ferroce's doorbell-record rows with VM a's NIC polling the records on a core of
its own (ferroce-nic --poll-cpu), the QEMUs on the other cores (bench.py's polled run)."""

from bench import polled_scenario

scenario = polled_scenario()
