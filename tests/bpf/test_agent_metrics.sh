#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The agent's metrics (issue 16): tierallocd --metrics serves the segments in Prometheus' text
# format from its loop, and a real Prometheus server scrapes it: the test waits (60 s at most)
# until Prometheus' query API returns the series of a live tieralloc process's segment, and fails
# if it never does. On the way: promtool accepts what it serves and what --textfile writes, other
# paths get 404, and a client that connects and sends nothing does not hold up the others.
# Skipped when prometheus is not installed, or when the agent cannot run here (not built, not
# root, no BTF: tests/bpf/test_agent.sh checks those refusals).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"

AGENT=$TA_TEST_BUILDDIR/agent/tierallocd
[[ -x $AGENT ]] || ta_skip "tierallocd not built (configure found no clang, bpftool or libbpf)"

# The options are checked before anything needs root: a usage error, exit 2, and one line.
echo "== options"
check_refused()
{
	local want=$1 rc=0
	shift
	"$AGENT" --once "$@" >/dev/null 2>"$TA_WORK/opt.err" || rc=$?
	[[ $rc == 2 ]] || ta_fail "$*: exit status $rc, want 2"
	[[ $(head -1 "$TA_WORK/opt.err") == "tierallocd: $want" ]] ||
		ta_fail "$*: \"$(head -1 "$TA_WORK/opt.err")\", want \"tierallocd: $want\""
}
check_refused '--metrics 10.1.2.3:9100: not a loopback address (--metrics-any allows any)' \
	--metrics 10.1.2.3:9100
check_refused 'bad --metrics "localhost:9100" (not a numeric address: localhost)' \
	--metrics localhost:9100
check_refused 'bad --metrics "9100x" ([ADDRESS:]PORT, a numeric address)' --metrics 9100x
check_refused 'bad --metrics "70000" ([ADDRESS:]PORT, a numeric address)' --metrics 70000
check_refused '--metrics-any without --metrics' --metrics-any
check_refused '--textfile needs a path' --textfile=
check_refused '--metrics needs a value' --metrics
check_refused 'bad --access "idle" (damon or none)' --access idle
check_refused '--access needs a value' --access

ta_require prometheus prometheus
ta_require promtool prometheus
[[ $(id -u) == 0 ]] || ta_skip "not root: the agent loads BPF programs"
[[ -r /sys/kernel/btf/vmlinux ]] || ta_skip "this kernel has no BTF"

seg=tieralloc-v1-test-metrics-$$
holder='' agent='' prom='' slow=''
stop()
{
	local p
	exec {slow}>&- 2>/dev/null || true
	for p in $agent $prom $holder; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -f "/dev/shm/$seg"
	ta_cleanup
}
trap stop EXIT

# http_get HOST:PORT PATH: the response, status line and headers included (HTTP/1.0 over bash's
# /dev/tcp: no HTTP client needed), within 10 s.
http_get()
{
	# shellcheck disable=SC2016 # expanded by the inner bash
	timeout 10 bash -c 'exec 3<>"/dev/tcp/${1%:*}/${1##*:}" &&
		printf "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" "$2" "$1" >&3 && cat <&3' http "$1" "$2"
}

# A tieralloc process and its segment, started directly so that $! is the process itself.
LD_PRELOAD=$TA_TEST_PRELOAD TIERALLOC_SHM_NAME="$seg" sleep 300 &
holder=$!
for _ in $(seq 1 100); do
	[[ -s /dev/shm/$seg ]] && break
	sleep 0.1
done
[[ -s /dev/shm/$seg ]] || ta_fail "the tieralloc process made no segment"

echo "== tierallocd --metrics"
ta_agent_lock
# Made here, not by the background job's redirection: the first look below may come before it
# (a missing file ended the test under set -e once, on a loaded machine).
: >"$TA_WORK/agent.out"
"$AGENT" --interval 0.2 --rescan 0.5 --metrics 127.0.0.1:0 --textfile "$TA_WORK/tieralloc.prom" \
	>>"$TA_WORK/agent.out" 2>"$TA_WORK/agent.err" &
agent=$!
addr=
for _ in $(seq 1 100); do
	addr=$(sed -n 's|^tierallocd: metrics at http://\(.*\)/metrics$|\1|p' "$TA_WORK/agent.out")
	[[ -n $addr ]] && break
	kill -0 $agent 2>/dev/null || break
	sleep 0.1
done
if [[ -z $addr ]]; then
	cat "$TA_WORK/agent.out" "$TA_WORK/agent.err" >&2
	ta_fail "the agent did not say where it serves its metrics"
fi
echo "serving at $addr"
[[ $addr == 127.0.0.1:* ]] || ta_fail "not on the loopback address: $addr"

# A client that connects and never sends: the agent must go on answering the others.
exec {slow}<>"/dev/tcp/${addr%:*}/${addr##*:}"
found=no
for _ in $(seq 1 50); do
	http_get "$addr" /metrics >"$TA_WORK/scrape" || ta_fail "GET /metrics failed (a slow client stalls the agent?)"
	grep -q "segment=\"/$seg\"" "$TA_WORK/scrape" && { found=yes; break; }
	sleep 0.2
done
[[ $found == yes ]] || ta_fail "the segment's series never appeared in /metrics"
head -1 "$TA_WORK/scrape" | grep -q '^HTTP/1.0 200 ' || ta_fail "GET /metrics: $(head -1 "$TA_WORK/scrape")"
grep -qi '^Content-Type: text/plain; version=0.0.4' "$TA_WORK/scrape" || ta_fail "no exposition content type"
sed '1,/^\r$/d' "$TA_WORK/scrape" >"$TA_WORK/body.prom"
promtool check metrics <"$TA_WORK/body.prom" || ta_fail "promtool rejects the agent's /metrics"
grep -q "^tieralloc_processes{.*segment=\"/$seg\"} 1$" "$TA_WORK/body.prom" ||
	ta_fail "tieralloc_processes of the segment is not 1"
http_get "$addr" /other | head -1 | grep -q '^HTTP/1.0 404 ' || ta_fail "GET /other is not 404"
exec {slow}>&-
echo "/metrics: ok (200, promtool, 404 elsewhere, not stalled by an idle client)"

for _ in $(seq 1 50); do
	[[ -s $TA_WORK/tieralloc.prom ]] && grep -q "segment=\"/$seg\"" "$TA_WORK/tieralloc.prom" && break
	sleep 0.1
done
grep -q "segment=\"/$seg\"" "$TA_WORK/tieralloc.prom" || ta_fail "--textfile has no series of the segment"
promtool check metrics <"$TA_WORK/tieralloc.prom" || ta_fail "promtool rejects --textfile's file"
[[ ! -e $TA_WORK/tieralloc.prom.tmp ]] || ta_fail "--textfile left its temporary file"
echo "--textfile: ok"

echo "== a Prometheus server scrapes it"
cat >"$TA_WORK/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: tierallocd
    static_configs:
      - targets: ['$addr']
YML
promtool check config "$TA_WORK/prometheus.yml" >/dev/null || ta_fail "promtool rejects the test's configuration"
# A free port: a few tries at random ones, each until the server is ready or gone.
port='' ready=no
for _ in 1 2 3 4 5; do
	port=$((20000 + RANDOM % 40000))
	prometheus --config.file="$TA_WORK/prometheus.yml" --storage.tsdb.path="$TA_WORK/tsdb" \
		--web.listen-address="127.0.0.1:$port" >"$TA_WORK/prometheus.log" 2>&1 &
	prom=$!
	for _ in $(seq 1 300); do
		kill -0 $prom 2>/dev/null || break
		http_get "127.0.0.1:$port" /-/ready 2>/dev/null | head -1 | grep -q ' 200 ' &&
			{ ready=yes; break; }
		sleep 0.2
	done
	[[ $ready == yes ]] && break
	kill $prom 2>/dev/null || true
	wait $prom 2>/dev/null || true
	prom=
done
if [[ $ready != yes ]]; then
	tail -20 "$TA_WORK/prometheus.log" >&2
	ta_fail "the Prometheus server did not start"
fi
echo "prometheus ready on 127.0.0.1:$port"
query="tieralloc_processes%7Bsegment%3D%22%2F$seg%22%7D"
t0=$SECONDS
until http_get "127.0.0.1:$port" "/api/v1/query?query=$query" >"$TA_WORK/query" 2>/dev/null &&
	grep -q '"result":\[{' "$TA_WORK/query"; do
	if ((SECONDS - t0 >= 60)); then
		tail -3 "$TA_WORK/query" >&2
		http_get "127.0.0.1:$port" /api/v1/targets | tail -1 >&2 || true
		ta_fail "Prometheus has no tieralloc series after 60 s"
	fi
	sleep 1
done
tail -1 "$TA_WORK/query"; echo
grep -q '"job":"tierallocd"' "$TA_WORK/query" || ta_fail "the series is not the tierallocd job's"
grep -q "\"value\":\[[0-9.]*,\"1\"\]" "$TA_WORK/query" || ta_fail "the scraped value is not 1"
echo "prometheus: the series after $((SECONDS - t0)) s"

kill -TERM $agent
rc=0
wait $agent || rc=$?
agent=
[[ $rc == 0 ]] || ta_fail "the agent exited $rc after SIGTERM"
[[ -s $TA_WORK/agent.err ]] && { cat "$TA_WORK/agent.err" >&2; ta_fail "the agent wrote to stderr"; }
echo PASS
