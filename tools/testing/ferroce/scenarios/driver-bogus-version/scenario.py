"""A NIC reporting an unknown interface version: probe refuses it with a clear
message naming both versions, touches nothing else, and rmmod works.
"""


from harness import CheckFailed, Run, Scenario, Vm

scenario = Scenario(vms=[Vm("a", "10.0.0.1/24", nic=True, nic_args=["--bogus-version"])], timeout=120)

DEV = r"ferroce [0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d: "


@scenario.check
def probe_refuses(run: Run) -> str:
    vm = run.vm("a")
    vm.step("modprobe").ok()
    log = vm.step("dmesg-probe")
    # ferroce-nic's BOGUS_IF_VERSION is 0x7eef0000: major 0x7eef.
    m = log.expect(DEV + r"unsupported hardware interface version 32495\.0 \(REG_IF_VERSION 0x7eef0000\); "
                   r"this driver supports version 1\.x$")
    for bad in ("ready: command queue", "hardware interface 1.", "timed out"):
        if bad in log.output:
            raise CheckFailed(f"unexpected '{bad}' after refusing the device:\n{log.output}")
    vm.step("unbound").ok()
    return m.group(0)


@scenario.check
def device_untouched(run: Run) -> None:
    counters = run.vm("a").step("counters").json("counters")
    # Two reads (ID, version), no writes: no reset, no queues.
    if counters["mmio_writes"] != 0 or counters["commands"] != 0:
        raise CheckFailed(f"the refused device saw {counters['mmio_writes']} writes and "
                          f"{counters['commands']} commands")


@scenario.check
def unload(run: Run) -> None:
    vm = run.vm("a")
    vm.step("rmmod").ok()
    vm.step("dmesg-unload").expect(r"ferroce: RoCEv2 RDMA driver unloaded$")
