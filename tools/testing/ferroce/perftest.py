# SPDX-License-Identifier: GPL-2.0
"""perftest between two VMs, for one RDMA device kind (the perftest* scenarios).

ib_write_bw, ib_read_bw, ib_send_bw, ib_send_lat and ib_atomic_bw, each connected over TCP and
through rdma_cm (-R); the guest side is perftest_server/perftest_client in guest/lib.sh. Each
must complete on both sides and print its result row; the figures are recorded, never asserted
(TCG).
"""

import re

from harness import CheckFailed, Run, Scenario, Vm

TESTS = ["write-bw", "read-bw", "send-bw", "send-lat", "atomic-bw"]
# A figure of a result row: with -F (the guests' perftest runs skip the CPU frequency check,
# whose fit can fail under TCG) a run too short for its clock prints inf or nan.
NUM = r"(?:[\d.]+|inf|-?nan)"
# The result row: "#bytes #iterations" then the figures.
ROW = {
    "bw": rf"^\s*(\d+)\s+(\d+)\s+({NUM})\s+({NUM})\s+({NUM})\s*$",   # BW peak, average [MiB/s], Mpps
    "lat": rf"^\s*(\d+)\s+(\d+)\s+({NUM})\s+({NUM})\s+({NUM})\s+({NUM})\s+({NUM}).*$",  # t_min t_max t_typical t_avg t_stdev
}


def scenario_for(kind: str, timeout: float) -> Scenario:
    """The scenario for device kind "ferroce" or "rxe", bounded by `timeout` seconds."""
    # The NICs poll doorbell records without ever sleeping (only the FERROCE_DOORBELL=record
    # runs have such QPs): the doorbells those runs write are then a count, 0.
    vms = [Vm(name, ip, nic=kind == "ferroce", nic_args=["--poll-spin-us", "1000000"])
           for name, ip in [("a", "10.0.0.1/24"), ("b", "10.0.0.2/24")]]
    scenario = Scenario(vms=vms, timeout=timeout)

    def result(run: Run, name: str) -> str:
        for vm in vms:
            step = run.vm(vm.name).step(name)
            step.ok()
            if re.search(r"Couldn't|failed|Failed", step.output):
                raise CheckFailed(f"{vm.name}: {name} reported an error:\n{step.output}")
        client = run.vm("a").step(name)
        row = client.expect(ROW["lat" if name.startswith("send-lat") else "bw"])
        fields = row.group(0).split()
        if name.startswith("send-lat"):
            return f"{fields[0]} B x {fields[1]}: t_typical {fields[4]} us, t_avg {fields[5]} us"
        return f"{fields[0]} B x {fields[1]}: {fields[3]} MiB/s average, {fields[4]} Mpps"

    for test in TESTS:
        for cm in ("", "-cm"):
            def check(run: Run, name: str = test + cm) -> str:
                return result(run, name)
            check.__name__ = (test + cm).replace("-", "_")
            scenario.check(check)
    return scenario
