# The PF's VM: once VFs b and c have measured side by side, floods its function's doorbells
# while they measure again; then the NIC's view of its functions.
. /scenario/common.sh
await quiet-b 18912
await quiet-c 18913
ferroce_hostile flood 40 > /tmp/flood.out 2>&1 &
signal "$(ip_of b)" 18910 go
signal "$(ip_of c)" 18911 go
step flood 60 sh -c 'until grep -q "^flood:" /tmp/flood.out; do sleep 0.5; done; cat /tmp/flood.out'
step functions 15 hostctl nic functions
