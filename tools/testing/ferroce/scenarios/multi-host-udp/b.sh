# VM b, on host west: the server for a, then the NVMe target (guest/lib.sh).
. /ferroce/lib.sh
across_hosts_server
