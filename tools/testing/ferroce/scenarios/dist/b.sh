# A plain Debian trixie VM booted with make dist's kernel: install make dist's two packages,
# let udev load ferroce, then serve a's ibv_rc_pingpong (Debian's).
. /ferroce/lib.sh
. /scenario/install.sh
step rc-pingpong 180 ibv_rc_pingpong -d "$dev" -g 3 -s 4096 -n 100 -p 18515
