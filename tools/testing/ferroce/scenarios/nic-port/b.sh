# Stay up while a pings, until it says it is done.
. /ferroce/lib.sh
await pinged 18900
