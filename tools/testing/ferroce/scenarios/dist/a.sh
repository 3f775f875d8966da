# A plain Debian trixie VM booted with make dist's kernel: install make dist's two packages,
# let udev load ferroce, then ibv_rc_pingpong (Debian's) against b.
. /ferroce/lib.sh
. /scenario/install.sh
retry rc-pingpong 120 ibv_rc_pingpong -d "$dev" -g 3 -s 4096 -n 100 -p 18515 "$(ip_of b)"
