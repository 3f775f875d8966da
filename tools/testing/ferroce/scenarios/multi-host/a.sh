# VM a, on host east: the client of b and of rxe VM c, then the NVMe host (guest/lib.sh).
. /ferroce/lib.sh
export RXE_PEER=c
across_hosts_client
