"""make bench: perftest on ferroce between two VMs at Ethernet MTU 1500, the NICs' cable shared
memory (ferroce-nic --wire shm): bench.py's table on another platform than ferroce-mtu1500's."""

from bench import scenario_for

scenario = scenario_for("ferroce", 1500, shm=True)
