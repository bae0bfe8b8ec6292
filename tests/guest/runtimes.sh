#!/bin/sh
# SPDX-License-Identifier: MIT
# Fairness for runtimes (issue 30 item 4): two containers (memory.max 900M each), each running the
# same program of a runtime whose heap does not come from malloc, the second started ~10 s after
# the first: Node.js (V8's heap, ~586 MiB of JS strings), Python (pymalloc's arenas, ~600 MiB
# of small str objects) and Java (G1's heap, ~446 MiB of strings, tests/guest/Hold.java). Run in
# its own guest with node 0 a third of memory (make check-guest
# boots it with --node-mem 1G,2G after the suite): a 900M container's tier-0 share is then ~290M
# (node 0's MemTotal is 962 MiB of 2.9 GiB), and node 0's free memory (~700 MiB once the kernel
# and the initramfs are in) holds both shares but not both programs.
# Usage: runtimes.sh BUILDDIR SRCDIR. Prints "PASS name" / "FAIL name: why"; exit 1 on failure.
#
#   runtimes.R.output  (R: node, python, java) every program built its data, then read it all back
#                      after both had built theirs: its checksum at the end is the one it computed
#                      as it built it, and the same in both containers (same program, same data).
#   runtimes.R.fair    once both have built their data, node 0 of each container (memory.numa_stat
#                      anon N0) comes within its tier-0 share + 5% and max/min within 1.05 (the
#                      issue's bar), waited for: placement follows the worker's samples, and
#                      demotion and filling (src/enforce/fill.c) act on each pass, so how long it
#                      took is printed, not judged (lib.sh, "Timing").
# The same pair without the preload is run first and reported, not checked (the issue measured
# 1.80x there for node; here 3.2-4.4x).
FAIR_PM=1050
B=$1
S=$2
W=/tmp/ta-runtimes
failed=0
# Building the data took 11-13 s under KVM on an idle host (67 s once under TCG); at a load of 12
# it can take several times that: a guard against a hang, not a deadline (lib.sh, "Timing").
GUARD_S=1200
# shellcheck source=tests/guest/lib.sh
. "$S/tests/guest/lib.sh"
NODE=/usr/bin/node
PYTHON=/usr/bin/python3
# java.base alone, made by jlink at build time (make check-guest, configure's JLINK).
JAVA=$B/tests/guest/jre/bin/java
rm -rf $W
mkdir -p $W

# Node.js: 600,000 one-byte strings of 1008 characters, 1024 bytes each on V8's heap (16 of
# header), 586 MiB, plus the array that holds them (4.6 MiB). Flat strings (Buffer.toString
# copies); a checksum as it goes, "built", then once GO exists every string read back and both
# checksums printed.
cat >$W/hold.js <<'EOF'
const fs = require('fs');
const [count, len, go] = [+process.argv[2], +process.argv[3], process.argv[4]];
const buf = Buffer.alloc(len);
function sum(s, h) {
	for (let k = 0; k < s.length; k += 7)
		h = (Math.imul(h, 31) + s.charCodeAt(k)) | 0;
	return h;
}
const held = new Array(count);
let made = 0;
for (let i = 0; i < count; i++) {
	buf.fill(97 + (i % 26));
	buf.write(i.toString(36) + ':', 0, 'latin1');
	held[i] = buf.toString('latin1');
	made = sum(held[i], made);
}
const mib = (b) => (b / 1048576).toFixed(1);
const m = process.memoryUsage();
console.log(`built strings=${count} heap_used=${mib(m.heapUsed)}M rss=${mib(m.rss)}M`);
const timer = setInterval(() => {
	if (!fs.existsSync(go))
		return;
	clearInterval(timer);
	let read = 0, bad = 0;
	for (let i = 0; i < count; i++) {
		read = sum(held[i], read);
		if (held[i].length !== len || !held[i].startsWith(i.toString(36) + ':'))
			bad++;
	}
	console.log(`checksum made=${made} read=${read} bad=${bad}`);
}, 200);
EOF

# Python (pymalloc, the default allocator: 1 MiB arenas of its own from mmap): 2,400,000 str
# objects of 200 characters, 249 bytes each in pymalloc's 256-byte class, 586 MiB, plus the list
# (18 MiB). The same protocol.
cat >$W/hold.py <<'EOF'
import os, sys, time
count, length, go = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def tag(i):
    return format(i, 'x') + ':'
def checksum(h, s, i):
    return (h * 31 + len(s) + ord(s[-1]) + ord(s[length // 2]) + i) & 0xffffffff
held = []
made = 0
for i in range(count):
    t = tag(i)
    s = t + chr(97 + i % 26) * (length - len(t))
    held.append(s)
    made = checksum(made, s, i)
rss = int(open('/proc/self/statm').read().split()[1]) * 4096
print('built objects=%d rss=%.1fM' % (count, rss / 1048576), flush=True)
while not os.path.exists(go):
    time.sleep(0.2)
read = bad = 0
for i, s in enumerate(held):
    read = checksum(read, s, i)
    if len(s) != length or not s.startswith(tag(i)):
        bad += 1
print('checksum made=%d read=%d bad=%d' % (made, read, bad), flush=True)
EOF

# prog_start RUNTIME NAME CGROUP [VAR=value...]: RUNTIME's program in CGROUP, output in
# $W/NAME.out.
prog_start() {
	_r=$1
	_n=$2
	_c=$3
	shift 3
	: >$W/$_n.out
	case $_r in
	node) set -- "$@" $NODE --max-old-space-size=1024 $W/hold.js 600000 1008 $W/go ;;
	python) set -- "$@" $PYTHON $W/hold.py 2400000 200 $W/go ;;
	# 450,000 strings of 1000 Latin-1 characters: a 1016-byte array and a 24-byte String
	# each, 446 MiB (G1 with 2 CPUs; -Xmx640m leaves its copying room within 900M).
	java) set -- "$@" $JAVA -XX:+UseG1GC -Xmx640m -cp $B/tests/guest/java Hold 450000 1000 \
		$W/go ;;
	esac
	# "echo 0" moves the writing process: the subshell that then becomes the program.
	(echo 0 >"$_c/cgroup.procs" && exec env "$@" >$W/$_n.out 2>$W/$_n.err) &
	eval "pid_$_n=\$!"
}
# built NAME: the program said "built" (or died: then it never will).
built() { grep -q '^built' $W/$1.out || ! eval "kill -0 \$pid_$1" 2>/dev/null; }
both_built() { built a && built b; }

# ratio A B: max/min x 1000
ratio() {
	if [ "$1" -lt "$2" ]; then set -- "$2" "$1"; fi
	if [ "$2" -gt 0 ]; then echo $(($1 * 1000 / $2)); else echo 999999; fi
}
pm() { echo "$(($1 / 1000)).$(printf %03d $(($1 % 1000)))"; }

# node0_of: node 0 of each container now, in $n0_a and $n0_b.
node0_of() {
	set -- $(anon /sys/fs/cgroup/rt-a)
	n0_a=$1
	set -- $(anon /sys/fs/cgroup/rt-b)
	n0_b=$1
}
# fair: both within the share + 5% and max/min within 1.05 (FAIR_PM).
fair() {
	node0_of
	[ "$n0_a" -le $((share / 1000 * FAIR_PM)) ] && [ "$n0_b" -le $((share / 1000 * FAIR_PM)) ] &&
		[ "$(ratio "$n0_a" "$n0_b")" -le $FAIR_PM ]
}

# pair RUNTIME LABEL [VAR=value...]: containers a and b (memory.max 900M), b started 10 s after
# a; once both have built their data, tier 0's share in $share (0 without a segment) and, under
# the preload, until fair (GUARD_S at most; $settled 1 if it came); node 0 of each in $n0_a and
# $n0_b; then both read their data back. 1 when a program failed.
pair() {
	runtime=$1
	label="$1, $2"
	shift 2
	rm -f $W/go
	for x in a b; do
		cg_new rt-$x 900M
		echo 0 >$cg/memory.swap.max 2>/dev/null
		prog_start "$runtime" $x $cg "$@"
		[ $x = a ] && sleep 10
	done
	until_true both_built
	echo "$label: built after $(secs "$took_cs") s (b's wait, from its start)"
	sg=$(seg_of /sys/fs/cgroup/rt-a)
	share=0
	[ -n "$sg" ] && share=$(share0 "$sg" $((900 * M)))
	settled=0
	if [ "$share" -gt 0 ]; then
		if until_true fair; then
			settled=1
			echo "$label: fair $(secs "$took_cs") s after both were built"
		fi
	else
		sleep 2
	fi
	node0_of
	for x in a b; do
		set -- $(anon /sys/fs/cgroup/rt-$x)
		echo "$label: cgroup $x: anon N0 $(mib "$1") N1 $(mib "$2"); $(head -1 $W/$x.out)"
	done
	touch $W/go
	ok=1
	for x in a b; do
		eval "wait \$pid_$x" || ok=0
		grep -q '^checksum' $W/$x.out || ok=0
	done
	ev_a=$(grep oom_kill /sys/fs/cgroup/rt-a/memory.events | tr '\n' ' ')
	ev_b=$(grep oom_kill /sys/fs/cgroup/rt-b/memory.events | tr '\n' ' ')
	[ $ok = 1 ] || echo "$label: a: $(tr '\n' ' ' <$W/a.out) $(tail -3 $W/a.err) ($ev_a);" \
		"b: $(tr '\n' ' ' <$W/b.out) $(tail -3 $W/b.err) ($ev_b)"
	for x in a b; do
		c=/sys/fs/cgroup/rt-$x
		sg=$(seg_of $c)
		[ -n "$sg" ] && rm -f "/dev/shm/$sg"
		rmdir $c
	done
	return $((1 - ok))
}

# checksums LABEL: both programs' checksums agree with themselves and with each other.
checksums() {
	ca=$(grep '^checksum' $W/a.out)
	cb=$(grep '^checksum' $W/b.out)
	echo "$1: a: $ca; b: $cb"
	[ "$(kv "$ca" made)" = "$(kv "$ca" read)" ] && [ "$(kv "$ca" bad)" = 0 ] &&
		[ "$ca" = "$cb" ] && [ -n "$ca" ]
}

# runtime R PROGRAM: both pairs of runtime R, the one under the preload judged.
runtime() {
	r=$1
	if [ ! -x "$2" ]; then
		fail "runtimes.$r" "$2 not in the guest (make check-guest includes it;" \
			"tests/install-deps.sh installs it)"
		return
	fi
	if pair $r "no preload" && checksums "$r, no preload"; then
		echo "$r, no preload: node 0 a $(mib "$n0_a") b $(mib "$n0_b")," \
			"max/min $(pm "$(ratio "$n0_a" "$n0_b")")"
	else
		fail runtimes.$r.output "without the preload: a program failed"
	fi
	rm -f $W/summary
	if ! pair $r tieralloc LD_PRELOAD="$PRELOAD" TIERALLOC_SUMMARY=$W/summary; then
		fail runtimes.$r.output "under the preload: a program failed"
		return
	fi
	if checksums "$r, tieralloc"; then
		pass runtimes.$r.output
	else
		fail runtimes.$r.output "checksums differ"
	fi
	# What each program's mappings moved (the summary at exit: both append to one file).
	sed -n 's/.* pid=\([0-9]*\) .* tier=\([0-9]*\) .* mapped_down=\([0-9]*\) mapped_up=\([0-9]*\).*/\1 \2 \3 \4/p' \
		$W/summary 2>/dev/null | while read -r pid t down up; do
		echo "$r, tieralloc: pid $pid tier $t: mapped moved down $(mib "$down"), up $(mib "$up")"
	done
	rt=$(ratio "$n0_a" "$n0_b")
	echo "$r, tieralloc: node 0 a $(mib "$n0_a") b $(mib "$n0_b"), max/min $(pm "$rt")," \
		"tier-0 share $(mib "$share")"
	if [ "$share" -gt 0 ] && [ $settled = 1 ]; then
		pass runtimes.$r.fair
	else
		fail runtimes.$r.fair "node 0 a $(mib "$n0_a") b $(mib "$n0_b"), max/min $(pm "$rt")," \
			"share $(mib "$share"), bound $(pm $FAIR_PM), $GUARD_S s waited"
	fi
}

echo "runtimes: node 0 $(sed -n 's/.*MemTotal: *//p' /sys/devices/system/node/node0/meminfo)," \
	"node 1 $(sed -n 's/.*MemTotal: *//p' /sys/devices/system/node/node1/meminfo)"
runtime node $NODE
runtime python $PYTHON
runtime java $JAVA
exit $failed
