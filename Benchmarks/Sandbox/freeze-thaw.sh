#!/usr/bin/env bash
# freeze-thaw.sh: how long freezing and thawing an app's launch unit takes through coalesced, beside a bare
# `systemctl freeze`/`thaw` of the same unit, in one run of the systemd sandbox (Tests/Sandbox/systemd-sandbox.sh).
#
#   Benchmarks/Sandbox/freeze-thaw.sh [ROUNDS]      (root; default 20 rounds; after `swiftb build`)
#
# Through the daemon: the time of its FreezeUnit and ThawUnit calls as its journal entries give them
# (COALESCED_DURATION_MS: the D-Bus round trip on a new bus connection, answered by systemd once the kernel has
# frozen or thawed the cgroup), and, polled with `systemctl show` (one poll's cost is printed too), from `coalescectl
# deactivate` returning (SuspensionDelaySec=0) to FreezerState reading frozen and from `coalescectl activate`
# returning to it reading running. Bare: the wall time of `systemctl freeze` and `systemctl thaw` (a process, a bus
# connection, the call). Medians in ms.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-20}"
bin=.build/debug
harness=Tests/Sandbox/systemd-sandbox.sh
dir="$(mktemp -d)"
bash "$harness" boot "$dir" --bin "$bin/coalesced" --bin "$bin/coalescectl" --bin "$bin/coalesce-example" --timeout 300 &
trap 'bash "$harness" stop "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
bash "$harness" wait "$dir" --timeout 60 >/dev/null
pid="$(cat "$dir/pid")"
root="/proc/$pid/root"
inside() { bash "$harness" exec "$dir" -- "$@"; }
cp systemd/coalesced.service systemd/coalesced.socket "$root/run/systemd/system/"
mkdir -p "$root/etc/coalesced"
printf '[Apps]\nSuspensionDelaySec=0\n' > "$root/etc/coalesced/coalesced.conf"
cat > "$root/run/systemd/system/example-mail.service" <<UNIT
[Service]
ExecStart=/usr/local/bin/coalesce-example --socket /run/coalesced/io.coalesced --name org.example.mail --launch-unit example-mail.service
UNIT
inside systemctl daemon-reload
inside systemctl start coalesced.service
inside coalescectl call io.coalesced.App.Register '{"name":"org.example.mail","launchUnit":"example-mail.service"}' >/dev/null
inside coalescectl launch org.example.mail >/dev/null
now() { date +%s%N; }
until_state() { while [ "$(inside systemctl show -p FreezerState --value example-mail.service)" != "$1" ]; do sleep 0.002; done; }
median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.1f", m/1e6}'; }
: > "$dir/daemon-freeze"; : > "$dir/daemon-thaw"; : > "$dir/bare-freeze"; : > "$dir/bare-thaw"
for _ in $(seq "$rounds"); do
    inside coalescectl deactivate org.example.mail >/dev/null; t0=$(now); until_state frozen; echo $(( $(now) - t0 )) >> "$dir/daemon-freeze"
    inside coalescectl activate org.example.mail >/dev/null; t0=$(now); until_state running; echo $(( $(now) - t0 )) >> "$dir/daemon-thaw"
done
# The app active and running: systemctl alone.
for _ in $(seq "$rounds"); do
    t0=$(now); inside systemctl freeze example-mail.service; echo $(( $(now) - t0 )) >> "$dir/bare-freeze"
    t0=$(now); inside systemctl thaw example-mail.service; echo $(( $(now) - t0 )) >> "$dir/bare-thaw"
done
# What one `systemctl show` poll costs, for reading the daemon's figures.
: > "$dir/poll"
for _ in $(seq "$rounds"); do t0=$(now); inside systemctl show -p FreezerState --value example-mail.service >/dev/null; echo $(( $(now) - t0 )) >> "$dir/poll"; done
journal() { inside journalctl -o cat COALESCED_SUSPENSION="$1" | grep -o ', [0-9.]* ms)' | tr -dc '0-9.\n' | awk '{printf "%d\n", $1*1e6}'; }
echo "rounds: $rounds (medians, ms)"
echo "coalesced's calls:  FreezeUnit $(journal frozen | median)  ThawUnit $(journal thawed | median)"
echo "through coalesced:  frozen $(median < "$dir/daemon-freeze")  running $(median < "$dir/daemon-thaw") after coalescectl returned"
echo "bare systemctl:     freeze $(median < "$dir/bare-freeze")  thaw $(median < "$dir/bare-thaw")"
echo "one systemctl show:  $(median < "$dir/poll")"
