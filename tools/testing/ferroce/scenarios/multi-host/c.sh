# VM c (rxe), on host west: the pingpong server for ferroce VM a across the hosts.
. /ferroce/lib.sh
rxe_pingpong_server
