# SPDX-License-Identifier: GPL-2.0
#
# xrc: what both VMs share.
. /ferroce/lib.sh

# perftest over XRC (-c XRC: XRC_SEND QPs at the client, XRC_RECV QPs and an XRC SRQ at the
# server; ib_send_lat has both on each side), one per line: NAME TOOL OPTIONS. Line i runs on
# port 18810 + i, once VM a has told VM b on port 18830 + i that its client is about to start.
XRC_PERFTESTS="xrc-send-bw ib_send_bw -s 4096 -n 100
xrc-write-bw ib_write_bw -s 4096 -n 100
xrc-read-bw ib_read_bw -s 4096 -n 100
xrc-send-lat ib_send_lat -n 100"
