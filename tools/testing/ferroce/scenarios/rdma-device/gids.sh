# Prints ferroce0's port 1 GID table: "gid <index> <gid> <type>" for the first 8 entries.
port=/sys/class/infiniband/ferroce0/ports/1
for i in 0 1 2 3 4 5 6 7; do
	echo "gid $i $(cat $port/gids/$i) $(cat $port/gid_attrs/types/$i 2>/dev/null)"
done
