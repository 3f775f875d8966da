"""make bench: perftest on ferroce between two VMs at Ethernet MTU 1500 (bench.py's table)."""

from bench import scenario_for

scenario = scenario_for("ferroce", 1500)
