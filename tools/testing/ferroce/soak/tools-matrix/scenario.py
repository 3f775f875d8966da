"""The tools matrix (make soak): every perftest tool (write, read, send, atomic; bw and lat) in
its modes (all sizes, events, rdma_cm, bidirectional, 4 QPs, duration; UC and UD), the
pingpongs (RC, UC, UD, SRQ; polled and with events) and the rdmacm examples, on ferroce0 and on
rxe0 in the same two VMs, at MTU 1500 and then 9000. Whatever works on rxe works on ferroce; a
mode that fails on both (one perftest refuses) is reported, not failed. The figures are
recorded, not compared. tools-parity (make check) runs a sample of it; both use its common.sh
and the format of its tools.list.
"""

import dataclasses
import importlib.util
from pathlib import Path

from harness import CheckFailed, Run, Scenario

_spec = importlib.util.spec_from_file_location(
    "tools_parity", Path(__file__).parents[2] / "scenarios" / "tools-parity" / "scenario.py")
parity_scenario = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(parity_scenario)

# The same VMs, without packet captures: the full matrix's would run to gigabytes.
VMS = [dataclasses.replace(vm, capture=False) for vm in parity_scenario.VMS]
scenario = Scenario(vms=VMS, timeout=7200)


def matrix_check(name: str, row: str, command: str):
    def check(run: Run) -> str:
        rxe, _ = parity_scenario.outcome(run, f"{name}-rxe")
        ferroce, why = parity_scenario.outcome(run, f"{name}-ferroce")
        if not rxe:
            return "fails on rxe too: " + ("and on ferroce" if not ferroce else "works on ferroce")
        if not ferroce:
            raise CheckFailed(f"works on rxe, fails on ferroce:\n{why}")
        return parity_scenario.parity(run, name, parity_scenario.ROWS[row])

    check.__name__ = name.replace("-", "_")
    check.__doc__ = f"{command}: works on ferroce wherever it works on rxe."
    return check


for _name, _row, _command in parity_scenario.tool_list(Path(__file__).parent / "tools.list"):
    for _suffix in ("", "-9000"):
        scenario.check(matrix_check(_name + _suffix, _row, _command))


@scenario.check
def setup(run: Run) -> None:
    for vm in VMS:
        run.vm(vm.name).step("mtu-9000").ok()
