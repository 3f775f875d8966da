/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The C interfaces the ferroce provider binds to: rdma-core's internal provider header (which
 * pulls in verbs.h and the uverbs command structures) and our user ABI. gen-bindings runs
 * bindgen over this file inside the toolchain root; nothing generated is committed.
 */
#include <infiniband/driver.h>
#include <rdma/ferroce-abi.h>

/* Made visible to bindgen as constants (they are macros of config.h / verbs.h). */
const unsigned int FERROCE_BIND_IBVERBS_PABI_VERSION = IBVERBS_PABI_VERSION;
