"""make bench: perftest on rxe between two VMs at Ethernet MTU 1500 (bench.py's table)."""

from bench import scenario_for

scenario = scenario_for("rxe", 1500)
