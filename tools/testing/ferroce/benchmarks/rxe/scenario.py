"""rxe baseline: perftest bandwidth and latency at RDMA MTU 1024 and 4096.

The figures are what ferroce will be compared with, in the same VMs under
the same emulation. They are reported, never judged: a check fails only when
a tool fails.
"""

from harness import Run, Scenario, Vm

VMS = [Vm("a", "10.0.0.1/24", mtu=9000), Vm("b", "10.0.0.2/24", mtu=9000)]
scenario = Scenario(vms=VMS, timeout=1200)

BW = r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$"
LAT = r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$"


def figure(run: Run, step: str, pattern: str, what: str) -> str:
    for vm in VMS:
        run.vm(vm.name).step(step).ok()
    m = run.vm("a").step(step).expect(pattern)
    return what.format(*m.groups())


def bench(name: str, pattern: str, what: str):
    def check(run: Run) -> str:
        return figure(run, name, pattern, what)
    check.__name__ = name.replace("-", "_")
    scenario.check(check)


for mtu in (1024, 4096):
    bench(f"write-bw-{mtu}", BW, f"ib_write_bw  64 KiB, MTU {mtu}: {{3}} MiB/s average")
    bench(f"read-bw-{mtu}", BW, f"ib_read_bw   64 KiB, MTU {mtu}: {{3}} MiB/s average")
    bench(f"send-bw-{mtu}", BW, f"ib_send_bw   64 KiB, MTU {mtu}: {{3}} MiB/s average")
bench("send-lat", LAT, "ib_send_lat  8 B: {4} us typical, {5} us average, {7} us 99%")
bench("write-lat", LAT, "ib_write_lat 8 B: {4} us typical, {5} us average, {7} us 99%")
