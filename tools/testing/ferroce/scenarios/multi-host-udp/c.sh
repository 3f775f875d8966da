# VM c (rxe), on host west: the pingpong server for ferroce VM d; its end of their UDP
# tunnel is a plain QEMU NIC (-netdev dgram with inet addresses).
. /ferroce/lib.sh
rxe_pingpong_server
