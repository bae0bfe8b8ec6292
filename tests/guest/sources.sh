#!/bin/sh
# SPDX-License-Identifier: MIT
# Which sources of access information the guest kernel offers (issue 12 item 16, issue 14 point
# 3), each tried through its real interface by access_sources (see there): NUMA balancing,
# soft-dirty (clear_refs + pagemap), userfaultfd, a kprobe on migrate_pages(), DAMON's sysfs
# interface, idle page tracking. Run by suite.sh as root, busybox sh.
# Usage: sources.sh BUILDDIR SRCDIR. Prints the sources, what the kernel lacks, and
#   sources.expected_set  the set found is the one expected of the kernel:
#                         6.1   numa_balancing soft_dirty userfaultfd kprobe_migrate_pages
#                               (Debian's 6.1 is built without DAMON and idle page tracking)
#                         6.12  the same and damon (still no idle page tracking)
#                         another kernel: SKIP (no expectation to compare with)
B=$1
# shellcheck source=tests/guest/lib.sh
. "$2/tests/guest/lib.sh"
PROBE=$B/tests/guest/access_sources
failed=0
ALL="numa_balancing soft_dirty userfaultfd kprobe_migrate_pages damon idle_page"

rel=$(uname -r)
case $rel in
6.1.*)
	kernel=6.1
	want="numa_balancing soft_dirty userfaultfd kprobe_migrate_pages"
	;;
6.12.*)
	kernel=6.12
	want="numa_balancing soft_dirty userfaultfd kprobe_migrate_pages damon"
	;;
*)
	kernel=$rel
	want=
	;;
esac

out=$("$PROBE" 2>/tmp/access_sources.err)
rc=$?
echo "$out" | sed 's/^source /   source: /'
have=
lacks=
for s in $ALL; do
	line=$(echo "$out" | grep "^source $s ")
	case $line in
	"source $s yes "*) have="$have $s" ;;
	"source $s no "*) lacks="$lacks, $s (${line#source "$s" no })" ;;
	*)
		fail sources.expected_set "access_sources reported nothing for $s"
		;;
	esac
done
echo "   kernel $rel offers:${have:- nothing}"
[ -n "$lacks" ] && echo "   kernel $rel lacks: ${lacks#, }"
if [ $rc -ne 0 ]; then
	fail sources.expected_set "access_sources could not run every probe: $(cat /tmp/access_sources.err)"
elif [ -z "$want" ]; then
	echo "SKIP sources.expected_set: no expected set for kernel $rel (only 6.1 and 6.12 have one)"
elif [ "$have" != " $want" ]; then
	fail sources.expected_set "kernel $kernel offers$have, expected $want"
else
	pass sources.expected_set
fi
exit $failed
