#!/usr/bin/env bash
# journal.sh: journal watches measured against a real journald, in one run of the systemd sandbox
# (Tests/Sandbox/systemd-sandbox.sh), with baselines from the same run.
#
#   Benchmarks/Sandbox/journal.sh [LINES]      (root; default 100000; after `swiftb build`; BIN=DIR for other binaries)
#
# The daemon runs as the shipped coalesced.service; journald's rate limit is off (a drop-in in
# /run/systemd/journald.conf.d). The Varlink side is Benchmarks/Sandbox/journal-client.py (the PyPI varlink
# package, inside the sandbox).
#
# 1. Reader throughput: for 1, 10 and 100 watches, LINES lines from a transient service of their own (every
#    tenth contains "mark"); each watch takes that unit's lines that contain "mark", all posting to one registered
#    app that is not running. The watches are added with start=cursor= the journal's newest entry, the daemon is
#    stopped, the lines written, the daemon started: entries/s from `systemctl start` until
#    Stats.journal.entriesRead reaches LINES, and until every watch has matched its lines (Stats polled every
#    10 ms). Baselines: `journalctl -o json` over one unit's LINES entries and over the whole journal.
# 2. Lag to a running app: a Python app attached and active, a queue watch on lag-writer.service, whose lines
#    each carry their send time (`date +%s%6N`) at about 20 a second; per event the app notes the time it came
#    off the stream. Percentiles of journald's part (__REALTIME_TIMESTAMP − send) and of the whole (receive − send);
#    the baseline is the same writer followed by `journalctl -f`.
# 3. A flood into a suspended app: one latest watch on flood-writer.service, to an app that is not running; a
#    writer at 50,000 lines/s for 5 s. Once under `strace -c` (the daemon's fsync/fdatasync calls until it has
#    read the flood), once without, with Stats round trips (one every 5 ms) beside the same with no flood.
set -euo pipefail
cd "$(dirname "$0")/../.."
lines="${1:-100000}"
bin="${BIN:-.build/debug}"  # BIN=.build/release for a release build
harness=Tests/Sandbox/systemd-sandbox.sh
client=Benchmarks/Sandbox/journal-client.py

# Setup: strace, and a Python that has the varlink package (the sandbox sees the host's /usr and /root).
if ! command -v strace >/dev/null; then
    apt-get install -y -q strace >/dev/null
fi
py="$(python3 -c 'import sys; print(sys.executable)')"
if ! "$py" -c 'import varlink' 2>/dev/null; then
    echo "journal.sh: $py has no varlink package: pip install varlink" >&2
    exit 1
fi

dir="$(mktemp -d)"
bash "$harness" boot "$dir" --bin "$bin/coalesced" --bin "$bin/coalescectl" --timeout 1200 &
trap 'bash "$harness" stop "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
bash "$harness" wait "$dir" --timeout 60 >/dev/null
pid="$(cat "$dir/pid")"
root="/proc/$pid/root"
inside() { bash "$harness" exec "$dir" -- "$@"; }
now() { date +%s%N; }
secs() { awk -v ns="$1" 'BEGIN {printf "%.2f", ns / 1e9}'; }
# Percentiles of a column of numbers: "p50 p99 max".
percentiles() { sort -n | awk '{a[NR]=$1} END {printf "%.1f %.1f %.1f", a[int(NR*0.50)+(NR*0.50>int(NR*0.50))], a[int(NR*0.99)+(NR*0.99>int(NR*0.99))], a[NR]}'; }
stat_of() { inside coalescectl call io.coalesced.System.Stats '{}' | "$py" -c "import json,sys; print(json.load(sys.stdin)['stats']['journal']['$1'])"; }
wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...: until COMMAND succeeds, every 50 ms
    local deadline=$(($(date +%s) + $1)) what=$2
    shift 2
    until "$@"; do
        if (($(date +%s) > deadline)); then
            echo "journal.sh: timed out waiting for $what" >&2
            exit 1
        fi
        sleep 0.05
    done
}

mkdir -p "$root/run/bench" "$root/run/systemd/journald.conf.d" "$root/etc/coalesced"
cp "$client" "$root/run/bench/client.py"
printf '[Journal]\nRateLimitIntervalSec=0\nSystemMaxUse=4G\nSystemMaxFileSize=1G\n' > "$root/run/systemd/journald.conf.d/bench.conf"
inside systemctl restart systemd-journald.service
cp systemd/coalesced.service systemd/coalesced.socket "$root/run/systemd/system/"
printf '[Memory]\nPressure=no\n' > "$root/etc/coalesced/coalesced.conf"
inside systemctl daemon-reload
inside systemctl start coalesced.service
for app in org.example.sink org.example.flooded; do
    inside coalescectl call io.coalesced.App.Register "{\"name\":\"$app\"}" >/dev/null
done
run() { inside "$py" /run/bench/client.py "$@"; }

# 1. Reader throughput. For each count of watches, in a daemon that has nothing else to read: the watches
# added with start=cursor= the journal's newest entry (so each has its position in the store), the daemon
# stopped, LINES lines written, the daemon started: one reader, from that position, for all the watches.
# Not start=head: a watch added with start=head that has read nothing by the stop is read from the journal's tail
# after the start; and watches added one after another with start=head while the reader is amid older entries
# miss some of them (all but the last added skip what the reader had read before the previous AddWatch).
matching=$((lines / 10))
writer() {  # writer UNIT: LINES lines from the transient service UNIT, every tenth with "mark"
    inside systemd-run --unit="$1" --wait --quiet /bin/sh -c \
        "awk 'BEGIN {for (i = 1; i <= $lines; i++) print (i % 10 ? \"entry \" i : \"entry \" i \" mark\")}'"
}
: > "$dir/read"
for watches in 1 10 100; do
    unit=bench-read-$watches.service
    inside systemctl reset-failed coalesced.service
    inside systemctl restart coalesced.service
    cursor=$(inside journalctl -q -n 1 -o json | "$py" -c 'import json, sys; print(json.load(sys.stdin)["__CURSOR"])')
    run add "$watches" "$unit" org.example.sink "cursor=$cursor"
    inside systemctl stop coalesced.socket coalesced.service
    t0=$(now)
    writer "$unit"
    all_stored() { [ "$(inside journalctl -q -o cat -n 1 _SYSTEMD_UNIT="$unit")" = "entry $lines mark" ]; }
    wait_for 300 "journald to store the writer's $lines lines" all_stored
    written_ns=$(($(now) - t0))
    (($(inside journalctl -q -o cat _SYSTEMD_UNIT="$unit" | wc -l) == lines)) || { echo "journal.sh: journald lost lines of $unit" >&2; exit 1; }
    echo "journal.sh: $watches watches: $lines lines stored, reading" >&2
    t0=$(now)
    inside systemctl start coalesced.socket coalesced.service
    started=$(($(now) - t0))
    result=$(run poll "$lines" $((watches * matching)))
    echo "$watches $t0 $started $written_ns $result" >> "$dir/read"
    run remove bench-
done
total=$(inside journalctl -q -o cat | wc -l)
time_json() {  # median of 3 runs of journalctl -o json ARGS > /dev/null, in ns
    local t
    for _ in 1 2 3; do
        t=$(now)
        inside journalctl -o json "$@" >/dev/null
        echo $(($(now) - t))
    done | sort -n | awk 'NR == 2'
}
unit_json=$(time_json _SYSTEMD_UNIT=bench-read-1.service)
all_json=$(time_json)

# 2. Lag to a running app.
echo "journal.sh: lag" >&2
lag_lines=300
inside systemd-run --unit=lag-app --quiet -p StandardOutput=file:/run/bench/lag.log -p StandardError=journal \
    "$py" /run/bench/client.py app org.example.lagapp bench.lag "$lag_lines" /run/bench/lag.out
app_state() { inside coalescectl call io.coalesced.System.GetApp '{"app":"org.example.lagapp"}' 2>/dev/null | "$py" -c 'import json,sys; print(json.load(sys.stdin)["app"]["state"])' 2>/dev/null; }
wait_for 30 "the lag app to attach" test -s "$root/run/bench/lag.out"
inside coalescectl activate org.example.lagapp >/dev/null
is_active() { [ "$(app_state)" = active ]; }
wait_for 30 "the lag app to be active" is_active
inside coalescectl watch add lag --unit lag-writer.service --kind bench.lag --to org.example.lagapp --policy queue:1000 >/dev/null
inside systemd-run --unit=lag-writer --wait --quiet /bin/sh -c \
    "for i in \$(seq $lag_lines); do echo \"lag \$(date +%s%6N)\"; sleep 0.05; done"
all_received() { (($(grep -c '^[0-9]' "$root/run/bench/lag.out") >= lag_lines)); }
wait_for 60 "the lag app to receive $lag_lines events" all_received
# The baseline: the same writer followed by `journalctl -f` (a bare sd-journal follower) over the whole journal
# (journalctl 252 with a match on a unit that has no entries yet misses that unit's first lines), each of the
# writer's lines stamped as it comes out.
inside systemd-run --unit=lag-follower --quiet -p StandardOutput=file:/run/bench/lag-base.out /bin/sh -c \
    "journalctl -f -n 0 -q -o cat | $py -u -c 'import sys, time; [print(l.split()[-1], time.time_ns() // 1000, flush=True) for l in sys.stdin if l.startswith(\"lag-base \")]'"
sleep 1  # journalctl to reach the tail
inside systemd-run --unit=lag-base --wait --quiet /bin/sh -c \
    "for i in \$(seq $lag_lines); do echo \"lag-base \$(date +%s%6N)\"; sleep 0.05; done"
base_received() { (($(grep -c '^[0-9]' "$root/run/bench/lag-base.out") >= lag_lines)); }
wait_for 60 "journalctl -f to print $lag_lines lines" base_received
inside systemctl stop lag-follower.service
lag_base=$(awk '{print ($2 - $1) / 1000}' "$root/run/bench/lag-base.out" | percentiles)
lag_first=$(awk '/^[0-9]/ && !first {first = $1} END {print first}' "$root/run/bench/lag.out")
lag_last=$(awk '/^[0-9]/ {last = $1} END {print last}' "$root/run/bench/lag.out")
lag_rate=$(awk -v n="$lag_lines" -v a="$lag_first" -v b="$lag_last" 'BEGIN {printf "%.1f", (n - 1) / ((b - a) / 1e6)}')
lag_journald=$(grep '^[0-9]' "$root/run/bench/lag.out" | awk '{print ($2 - $1) / 1000}' | percentiles)
lag_total=$(grep '^[0-9]' "$root/run/bench/lag.out" | awk '{print ($3 - $1) / 1000}' | percentiles)
lag_daemon=$(grep '^[0-9]' "$root/run/bench/lag.out" | awk '{print ($3 - $2) / 1000}' | percentiles)

# 3. A flood into an app that is not running.
echo "journal.sh: flood" >&2
inside coalescectl watch add flood --unit flood-writer.service --kind bench.flood --to org.example.flooded >/dev/null
daemon_pid=$(awk 'NR == 1' "$(cat "$dir/cgroup")/system.slice/coalesced.service/cgroup.procs")
flood() {  # flood OUT: 50,000 lines/s for 5 s from flood-writer.service, then until the daemon has matched them
    local matched_before
    matched_before=$(stat_of matched)
    inside systemd-run --unit=flood-writer --wait --quiet "$py" /run/bench/client.py flood 50000 5 "/run/bench/$1"
    read -r flood_lines flood_secs < "$root/run/bench/$1"
    flood_secs=$(printf '%.2f' "$flood_secs")
    flood_matched() { (($(stat_of matched) - matched_before >= flood_lines)); }
    wait_for 120 "the daemon to match the flood" flood_matched
}
posts_before=$(stat_of posts)
strace -f -c -e trace=fsync,fdatasync -p "$daemon_pid" -o "$dir/strace" 2>/dev/null &
strace_pid=$!
sleep 1  # strace attaches to every thread
t0=$(now)
flood flood1.out
flood_ns=$(($(now) - t0))
kill -INT "$strace_pid"
wait "$strace_pid" || true
posts=$(($(stat_of posts) - posts_before))
syncs=$(awk '$NF == "fsync" || $NF == "fdatasync" {n += $4} END {print n + 0}' "$dir/strace")
flood1_lines=$flood_lines flood1_secs=$flood_secs
held=$(inside coalescectl call io.coalesced.System.GetQueue '{"app":"org.example.flooded"}' | "$py" -c \
    'import json,sys; h=json.load(sys.stdin)["held"]; print(len(h), sum(k["count"] for k in h))')
run rtt 5 0.005 /run/bench/rtt-idle
run rtt 6 0.005 /run/bench/rtt-flood &
rtt_pid=$!
flood flood2.out
wait "$rtt_pid"

echo "journal.sh: $(date -u +%F), LINES=$lines, binaries of $bin, systemd $(inside journalctl --version | awk 'NR == 1 {print $2}')"
echo
echo "1. reader throughput ($lines entries of one unit, every tenth with \"mark\"; $total in the journal; Stats polled every 10 ms)"
awk -v n="$lines" -v t="$unit_json" 'BEGIN {printf "   baseline journalctl -o json _SYSTEMD_UNIT=UNIT > /dev/null: %.2f s, %d entries/s\n", t / 1e9, n / (t / 1e9)}'
awk -v n="$total" -v t="$all_json" 'BEGIN {printf "   baseline journalctl -o json > /dev/null (%d entries): %.2f s, %d entries/s\n", n, t / 1e9, n / (t / 1e9)}'
printf '   %-8s %-14s %-10s %-24s %-24s %-12s %-8s %s\n' watches "written (/s)" "start (s)" "entriesRead=N (s, /s)" "all matched (s, /s)" entriesRead matched posts
"$py" -c '
import json, sys
lines = int(sys.argv[1])
for line in open(sys.argv[2]):
    watches, t0, started, written, result = line.split(" ", 4)
    r = json.loads(result)
    t0 = int(t0) / 1e9
    read, matched = r["read"] - t0, r["matched"] - t0
    j = r["journal"]
    print("   %-8s %-14d %-10.2f %-24s %-24s %-12d %-8d %d" % (watches, lines / (int(written) / 1e9), int(started) / 1e9,
        "%.2f, %d" % (read, lines / read), "%.2f, %d" % (matched, lines / matched), j["entriesRead"], j["matched"], j["posts"]))
' "$lines" "$dir/read"
echo
echo "2. lag to an active app ($lag_lines lines at $lag_rate/s, queue:1000, BatchIntervalSec=100ms, QueueBurst=100): p50 p99 max, ms"
echo "   send -> journald (__REALTIME_TIMESTAMP): $lag_journald"
echo "   journald -> app:                         $lag_daemon"
echo "   send -> app:                             $lag_total"
echo "   baseline, send -> journalctl -f:         $lag_base"
echo
echo "3. flood ($flood1_lines lines in $flood1_secs s from the writer; latest watch; app not running)"
echo "   under strace, until the daemon matched them all ($(secs "$flood_ns") s): fsync+fdatasync $syncs ($(awk -v n="$syncs" -v t="$flood_ns" 'BEGIN {printf "%.1f", n / (t / 1e9)}')/s), posts $posts"
read -r held_kinds held_count <<< "$held"
echo "   held afterwards: $held_kinds kind, its count $held_count"
echo "   Stats round trips, one every 5 ms, p50 p99 max (µs): idle $(percentiles < "$root/run/bench/rtt-idle"); flood ($flood_lines lines in $flood_secs s) $(percentiles < "$root/run/bench/rtt-flood")"
