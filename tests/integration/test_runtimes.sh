#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Runtimes whose heaps come from mmap, under the preload: a node program (V8's heap of objects and
# strings, Buffers whose backing stores come from malloc, zlib and a hash in C++, a worker thread
# with its own isolate) and a java program (G1's heap; three threads building maps, sorting and
# joining strings). Each must print the same with and without the preload, and again with two
# tiers and a 1 MiB tier-0 limit. The summary must show that tieralloc found the runtime's own
# mappings resident (mapped_peak) in tier 0 and steered the rest to tier 1: the quotas saw the
# heap, not only what came through malloc (docs/runtimes.md).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

ta_require node nodejs
ta_require java openjdk-17-jdk-headless
ta_require javac openjdk-17-jdk-headless

cat >"$TA_WORK/work.js" <<'EOF'
'use strict';
const crypto = require('crypto');
const zlib = require('zlib');
const { Worker, isMainThread, parentPort } = require('worker_threads');

function build(seed, n) {
	const rows = [];
	for (let i = 0; i < n; i++) rows.push({ id: i, name: 'row' + ((i * seed) % 9973), v: [i, i * 2] });
	return rows;
}

if (!isMainThread) {
	const rows = build(7, 200000);
	parentPort.postMessage(JSON.stringify(rows.slice(-3)) + ' ' + rows.length);
} else {
	const h = crypto.createHash('sha256');
	let kept = [];
	for (let r = 0; r < 8; r++) {
		const rows = build(r + 3, 150000);
		const text = JSON.stringify(rows);
		const packed = zlib.deflateSync(Buffer.from(text));
		const back = zlib.inflateSync(packed).toString();
		if (back !== text) throw new Error('zlib round trip differs');
		h.update(packed);
		kept.push(Buffer.alloc(64 * 1024 + r * 4096, r));
		if (kept.length > 4) kept = kept.slice(2);
		console.log('round', r, rows.length, text.length);
	}
	console.log('sha256', h.digest('hex'), 'kept', kept.length);
	const w = new Worker(__filename);
	w.on('message', (m) => console.log('worker', m));
	w.on('error', (e) => { console.error(e); process.exitCode = 1; });
}
EOF

cat >"$TA_WORK/Work.java" <<'EOF'
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

public final class Work {
	static String task(int seed) {
		HashMap<String, Integer> counts = new HashMap<>();
		List<String> words = new ArrayList<>();
		long x = seed;
		for (int i = 0; i < 300000; i++) {
			x = x * 6364136223846793005L + 1442695040888963407L;
			String w = Long.toString((x >>> 40) % 50000, 36);
			words.add(w);
			counts.merge(w, 1, Integer::sum);
		}
		Collections.sort(words);
		StringBuilder sb = new StringBuilder();
		for (int i = 0; i < words.size(); i += 1000)
			sb.append(words.get(i)).append(',');
		return seed + " " + counts.size() + " " + words.get(words.size() / 2) + " " +
			sb.toString().hashCode();
	}

	public static void main(String[] args) throws Exception {
		ExecutorService pool = Executors.newFixedThreadPool(3);
		List<Future<String>> out = new ArrayList<>();
		for (int s = 1; s <= 9; s++) {
			final int seed = s;
			out.add(pool.submit(() -> task(seed)));
		}
		for (Future<String> f : out)
			System.out.println(f.get());
		pool.shutdown();
	}
}
EOF
javac -d "$TA_WORK/classes" "$TA_WORK/Work.java" ||
	ta_hard_error "javac could not compile the test's Java program"

node_work()
{
	node "$TA_WORK/work.js"
}
java_work()
{
	# G1 with a fixed heap ceiling: the same collector and sizing in every run.
	java -XX:+UseG1GC -Xmx512m -cp "$TA_WORK/classes" Work
}

# The runtime's heap is its own mappings: tier 0's summary line must show them found resident.
TA_SUMMARY_MATCH="tier=0 .* mapped_peak=[1-9]" compare_runs node node_work
TA_SUMMARY_MATCH="tier=0 .* mapped_peak=[1-9]" compare_runs java java_work
# shellcheck disable=SC2034 # read by compare_runs
TA_PRELOAD_ENV=(TIERALLOC_TIERS="0;0" TIERALLOC_PROCESS_LIMIT="0=1M" TIERALLOC_CHARGE_BATCH=4K)
TA_SUMMARY_MATCH="tier=1 .* steered_in=[1-9]" compare_runs node-two-tiers node_work
TA_SUMMARY_MATCH="tier=1 .* steered_in=[1-9]" compare_runs java-two-tiers java_work
