# VM a, on host east: the client of b, then the NVMe host (guest/lib.sh).
. /ferroce/lib.sh
across_hosts_client
