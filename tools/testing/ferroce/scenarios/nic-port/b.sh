# Stay up while a pings.
. /ferroce/lib.sh
wait_for_ping "$(ip_of a)"
sleep 10
