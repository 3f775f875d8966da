. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3

# bw NAME PORT SERVER: ib_write_bw of 64 KiB for 10 s to SERVER (the client side).
bw() {
	wait_for_ping "$3"
	retry "$1" 120 ib_write_bw -F -d ferroce0 -x 3 -s 65536 -D 10 -p "$2" "$3"
}
# serve NAME PORT: the server side.
serve() {
	step "$1" 300 ib_write_bw -F -d ferroce0 -x 3 -s 65536 -D 10 -p "$2"
}
