"""perftest on ferroce: ib_write_bw, ib_read_bw, ib_send_bw, ib_send_lat and ib_atomic_bw with
GID 3, over TCP and through rdma_cm (-R), kernel-bypass through libferroce-rdmav34.so.
Checks and figures: perftest.py; perftest-rxe is the same on rxe."""

from perftest import scenario_for

scenario = scenario_for("ferroce")
