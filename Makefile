# SPDX-License-Identifier: GPL-2.0
#
# ferroce: a RoCEv2 RDMA NIC driver in Rust-for-Linux, the emulated PCI NIC
# it drives and the rdma-core provider for it, testable under QEMU.
#
#   make run         two VMs doing RDMA, printing what happens
#   make check       every test; the last line reads "N passed, N failed"
#   make lab         VMs a and b with ferroce0 kept up for you, and a shell in a
#                    (tools/ferroce lab up|shell|exec|cp|status|down: see README.md)
#   make dist        out/dist: a kernel, modules and provider packages and the NIC for a VM
#                    of your own (Documentation/infiniband/ferroce-dist.rst)
#   make check-debug every VM scenario on the debug kernel (KASAN, kmemleak, lockdep)
#   make check-flaky SCENARIOS="<name> ..." N=5   each scenario N times: failures per check
#
#   make toolchain   the pinned Debian trixie root (mmdebstrap), cached
#   make kernel      the Rust-enabled 7.3 guest kernel with our files in it
#   make modules     ferroce.ko against that kernel (the kernel is not rebuilt)
#   make nic         the cargo workspace under tools/ (NIC model, tools)
#   make initramfs   everything a VM boots
#   make bench       benchmarks (never part of make check's verdict)
#   make soak        long campaigns (the full tools matrix), never part of make check
#   make fuzz        libFuzzer campaign on the NIC's frame, command and pair targets (FUZZ_SECONDS each)
#   make shell       a shell in the toolchain root
#   make patches     out/patches: our kernel files as a patch series against the pinned
#                    linux-source, with a cover letter and checkpatch's findings
#                    (tools/kernel/series; make check applies it: patches-apply)
#
# Variables: FERROCE_CACHE=/var/cache/ferroce  VARIANT=default|debug
#            ACCEL=auto|kvm|tcg  JOBS=<n>  SCENARIOS="<name> ..." (check)
#            VM_JOBS=<n> (check: scenarios at once, by their measured CPU; default 2)
#            LAB_VMS="a b:rxe c:vf:a" or "a@east b@west" (lab: its VMs, hosts)  LAB_PACKAGES="pkg ..." or a file (lab: Debian
#            packages added to its guest root)  LAB_MEMORY=<MiB> (lab: per VM, default 2048)

FERROCE := tools/ferroce
export FERROCE_CACHE VARIANT ACCEL JOBS VM_JOBS FUZZ_SECONDS FUZZ_TARGETS LAB_VMS LAB_PACKAGES LAB_MEMORY

.PHONY: all toolchain kernel modules nic initramfs run lab dist check check-debug check-flaky bench soak fuzz shell patches clean

all: initramfs

toolchain kernel modules nic initramfs run lab dist fuzz shell patches:
	@$(FERROCE) $@

bench:
	@$(FERROCE) bench $(BENCHMARKS)

check:
	@$(FERROCE) check $(SCENARIOS)

check-debug:
	@$(FERROCE) check-debug $(SCENARIOS)

check-flaky:
	@N=$(N) $(FERROCE) check-flaky $(SCENARIOS)

soak:
	@$(FERROCE) soak $(SCENARIOS)

clean:
	rm -rf out tools/target
