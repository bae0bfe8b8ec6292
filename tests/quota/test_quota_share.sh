#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Several processes of one "cgroup" (one segment, named by TIERALLOC_SHM_NAME) share one tier-0
# quota. P=4 processes, started together, each run T=2 threads that allocate 4 MiB each in 4 KiB
# blocks and hold them: 32 MiB against a tier-0 high and max of 8M. Each process reports the
# bytes of its blocks per tier (tieralloc_tier_of), the segment is read meanwhile and after.
#
# The batching bound, from the code (src/quota/charge.c stock_refill and ta_charge, src/quota/shm.c
# ta_shm_charge). A thread whose stock of a tier is below the object
# size charges BLOCK + BATCH at once (just BLOCK when that would pass the limit). ta_shm_charge
# adds to the tier's charge and takes it back at once when the sum passes the limit, so a charge
# that is not forced (explicit tier, overflow into the last tier: neither happens in tier 0 here)
# never leaves the tier above its limit; live bytes are the charge minus the threads' stocks.
# With N = P*(T+1) threads that may charge (the workers and each process's main thread):
#   over:  sum of tier-0 block bytes <= MAX, exactly; the segment's peak <= MAX; its charge read
#          at rest <= MAX; read while threads charge, it may include attempts about to be taken
#          back, one per thread: <= MAX + N*(BATCH + BLOCK).
#   under: the batching error is unused stock and refusals caused by other threads' attempts in
#          flight: at the end charge > MAX - BLOCK - (N - 1)*(BATCH + BLOCK), and
#          charge - block bytes - start-up charges <= N*(BATCH + 2*BLOCK) + P*64K (each thread
#          holds < BATCH + 2*BLOCK of stock; 64K: the processes' own small allocations, stdio and
#          pthreads; start-up: what each process held when tieralloc started, src/quota/startup.c).
#          Default batch: 8M - 2.8M and 3.3M; batch 4K: 8M - 92K and 400K.
# Run with the default batch (256K) and with the smallest (4K). The rest must be in tier 1.
# After every process exited, the next one to attach takes back what they left in their slots.
# First, 3 x 8 processes start at once on new segments: all end up in the one segment each time.
# Variables named in check conditions are read by its arithmetic, unseen by shellcheck.
# shellcheck disable=SC2034
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

P=4
T=2
PER_THREAD=$((4 << 20))
BLOCK=4096
MAX=$((8 << 20))
K=1024

run_share()
{
	local batch=$1 name=share-$1
	local s
	s=$(seg "$name")
	local -a env=(TIERALLOC_TIERS="0;0" TIERALLOC_SHM_NAME="$s"
		TIERALLOC_TIER_LIMITS="0.high=8M;0.max=8M;1.high=1G;1.max=1G")
	[[ $batch == default ]] || env+=(TIERALLOC_CHARGE_BATCH="$batch")
	local bytes=262144
	[[ $batch == default ]] || bytes=$((${batch%K} * 1024))
	echo "== $P processes x $T threads, tier-0 max 8M, charge batch $bytes"

	local i
	for i in $(seq 1 $P); do
		hog_start "$name-$i" "${env[@]}"
	done
	# Each answers once attached (the preload attaches at start).
	for i in $(seq 1 $P); do
		hog_cmd "$name-$i" pid
	done
	peek "$s"
	check "$(nslots) == P" \
		"all $P processes hold a slot of the one segment"
	check "$(pk tier=0 max) == MAX && $(pk tier=0 high) == MAX" "tier-0 limits from TIERALLOC_TIER_LIMITS"

	# Go: every process at once; read the segment while they run.
	for i in $(seq 1 $P); do
		hog_send "$name-$i" "alloc $((T * PER_THREAD)) $BLOCK $T"
	done
	local seen_max=0 c pending=1
	while [[ $pending == 1 ]]; do
		pending=0
		for i in $(seq 1 $P); do
			[[ $(wc -l <"$TA_WORK/$name-$i.out") -ge ${HOG_WANT[$name-$i]} ]] || pending=1
		done
		PEEK=$("$PEEK_BIN" "$s") || ta_fail "shm_peek $s"
		c=$(pk tier=0 charged)
		((c > seen_max)) && seen_max=$c
		[[ $pending == 0 ]] || sleep 0.01
	done

	local s0=0 s1=0 st0=0 r
	for i in $(seq 1 $P); do
		hog_reply "$name-$i"
		r=$REPLY
		echo "   process $i: $r"
		check "$(kv "$r" failed) == 0 && $(kv "$r" blocks) == T * PER_THREAD / BLOCK" \
			"process $i: every block allocated"
		check "$(kv "$r" tier0) + $(kv "$r" tier1) == T * PER_THREAD" \
			"process $i: every block in tier 0 or 1"
		s0=$((s0 + $(kv "$r" tier0)))
		st0=$((st0 + $(kv "$r" startup0)))
		s1=$((s1 + $(kv "$r" tier1)))
	done
	peek "$s"
	local charged peak slotsum charged1
	charged=$(pk tier=0 charged)
	peak=$(pk tier=0 peak)
	slotsum=$(pk tier=0 slotsum)
	charged1=$(pk tier=1 charged)
	local n=$((P * (T + 1)))
	local in_flight=$((n * (bytes + BLOCK)))
	local refusal=$((BLOCK + (n - 1) * (bytes + BLOCK)))
	local stock=$((n * (bytes + 2 * BLOCK) + P * 64 * K))
	echo "   tier-0 blocks $((s0 / K)) KiB, tier-1 blocks $((s1 / K)) KiB;" \
		"segment tier-0 charged $((charged / K)) KiB, peak $((peak / K)) KiB," \
		"highest seen while running $((seen_max / K)) KiB; tier-1 charged $((charged1 / K)) KiB"
	echo "   bounds: over 0 (at rest), $((in_flight / K)) KiB (in flight);" \
		"under: refusals $((refusal / K)) KiB, stock $((stock / K)) KiB;" \
		"start-up charges $((st0 / K)) KiB, unused stock now $(((charged - s0 - st0) / K)) KiB"
	check "s0 <= MAX" "sum of tier-0 blocks within the tier-0 max"
	check "peak <= MAX" "segment's tier-0 peak within the max"
	check "charged <= MAX" "segment's tier-0 charge at rest within the max"
	check "seen_max <= MAX + in_flight" "tier-0 charge read while running within max + in-flight bound"
	check "charged == slotsum" "tier charge is the sum of the slots' charges"
	check "charged > MAX - refusal" "tier 0 filled up to the refusal bound"
	check "st0 > 0" "the processes' start-up charges are in tier 0"
	check "charged >= s0 + st0 && charged - s0 - st0 <= stock" \
		"unused tier-0 stock within the bound"
	check "s1 == P * T * PER_THREAD - s0" "the rest is in tier 1"
	check "charged1 >= s1" "tier 1 charged with its blocks"
	check "$(pk tier=0 steered_away) > 0" "allocations were steered away from tier 0"

	# Free, quit: processes leave their slots behind (no detach at exit); the next process
	# to attach takes them back.
	for i in $(seq 1 $P); do
		hog_cmd "$name-$i" free
	done
	for i in $(seq 1 $P); do
		hog_quit "$name-$i"
		hog_stderr_clean "$name-$i"
	done
	peek "$s"
	# Peers' workers take dead slots back while they run: count from here.
	local left=$(($(pk tier=0 charged) + $(pk tier=1 charged)))
	local taken_before=$(($(pk tier=0 reclaimed) + $(pk tier=1 reclaimed)))
	hog_start "$name-next" "${env[@]}"
	hog_cmd "$name-next" pid
	local next
	next=$(kv "$REPLY" pid)
	peek "$s"
	check "$(nslots) == 1" "the exited processes' slots are free again"
	grep -q "^slot pid=$next " <<<"$PEEK" || ta_fail "the new process's slot is missing"
	check "$(pk tier=0 charged) == $(pk tier=0 slotsum) && $(pk tier=1 charged) == $(pk tier=1 slotsum)" \
		"after the take-back, the tiers' charges are the new process's"
	check "$(pk tier=0 reclaimed) + $(pk tier=1 reclaimed) - taken_before == left" \
		"everything the exited processes left was taken back"
	echo "   after exit: $((left / K)) KiB left in dead slots, all taken back by the next process"
	hog_quit "$name-next"
	hog_stderr_clean "$name-next"
}

# Creation when several processes start at once: 8 processes on a segment that does not exist
# yet, three times; one creates it (O_CREAT|O_EXCL), the others wait for it to be ready. Every
# one must end up in it, without a warning.
race()
{
	local round=$1 s i n=8
	s=$(seg "race-$round")
	for i in $(seq 1 $n); do
		hog_start "race-$round-$i" TIERALLOC_TIERS="0;0" TIERALLOC_SHM_NAME="$s" \
			TIERALLOC_TIER_LIMITS="0.high=8M;0.max=8M;1.high=1G;1.max=1G"
	done
	for i in $(seq 1 $n); do
		hog_cmd "race-$round-$i" pid
	done
	peek "$s"
	check "$(nslots) == n" "round $round: all $n processes attached to the one segment"
	for i in $(seq 1 $n); do
		hog_quit "race-$round-$i"
		hog_stderr_clean "race-$round-$i"
	done
}
echo "== $((3 * 8)) processes starting at once on new segments"
race 1
race 2
race 3

run_share default
run_share 4K
q_finish
