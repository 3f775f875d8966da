"""make bench: perftest on ferroce between two VMs at Ethernet MTU 9000, the NICs' cable shared
memory (ferroce-nic --wire shm): bench.py's table on another platform than ferroce-mtu9000's."""

from bench import scenario_for

scenario = scenario_for("ferroce", 9000, shm=True)
