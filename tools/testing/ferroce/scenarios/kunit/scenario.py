"""KUnit: every #[kunit_tests] suite of the abstractions and the driver passes.

The kernel crate's suites (rust_rdma_device, rust_net_device) and its rustdoc examples
(rust_doctests_kernel: every `# Examples` block of rust/kernel/, upstream's and ours) run at boot; the driver's
(ferroce_verbs, ferroce_cmdq, ferroce_qp, ferroce_checks, ferroce_ids) when ferroce.ko loads. Their KTAP results are read from dmesg.
"""

import re

from harness import CheckFailed, Run, Scenario, Vm

scenario = Scenario(vms=[Vm("a", "10.0.0.1/24", boot_tests=True)], timeout=120)

RESULT = re.compile(r"^\[[ \d.]+\] (\s*)(not ok|ok) \d+ (\S+)", re.M)


def suites(run: Run, step: str, names: list[str]) -> str:
    out = run.vm("a").step(step).output
    results = {}
    failed_cases = []
    for indent, verdict, name in RESULT.findall(out):
        if indent:
            if verdict == "not ok":
                failed_cases.append(name)
        else:
            results[name] = verdict
    for name in names:
        if name not in results:
            raise CheckFailed(f"suite {name} did not run:\n{out}")
        if results[name] != "ok":
            raise CheckFailed(f"suite {name} failed (cases {failed_cases}):\n{out}")
    totals = re.findall(r"# Totals: (pass:\d+ fail:\d+ skip:\d+ total:\d+)", out)
    return ", ".join(f"{n}: ok" for n in names) + (f" ({totals[-1]})" if totals else "")


@scenario.check
def abstraction_suites(run: Run) -> str:
    return suites(run, "boot-suites", ["rust_rdma_device", "rust_net_device"])


@scenario.check
def rustdoc_examples(run: Run) -> str:
    """The examples in rust/kernel/ compile (into the kernel) and pass."""
    out = run.vm("a").step("boot-suites").output
    ours = re.findall(r"(?<!not )ok \d+ (rust_doctest_kernel_(?:rdma|pci_irq_handlers)\S*)", out)
    if not ours:
        raise CheckFailed(f"no example of rust/kernel/rdma or pci/irq_handlers ran:\n{out}")
    return suites(run, "boot-suites", ["rust_doctests_kernel"]) + f"; ours: {', '.join(ours)}"


@scenario.check
def driver_suites(run: Run) -> str:
    run.vm("a").step("modprobe").ok()
    return suites(run, "module-suites", ["ferroce_verbs", "ferroce_cmdq", "ferroce_qp", "ferroce_checks", "ferroce_ids"])
