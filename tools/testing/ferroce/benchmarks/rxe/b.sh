# perftest servers; the client is VM a.
. /ferroce/lib.sh
step rxe-setup 30 sh -c 'modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0'
wait_for_gid rxe0 1
port=18600
for mtu in 1024 4096; do
	for t in write read send; do
		port=$((port + 1))
		step $t-bw-$mtu 300 ib_${t}_bw -d rxe0 -x 1 -m $mtu -s 65536 -n 1000 -p $port
	done
done
step send-lat 300 ib_send_lat -d rxe0 -x 1 -s 8 -n 1000 -p 18611
step write-lat 300 ib_write_lat -d rxe0 -x 1 -s 8 -n 1000 -p 18612
