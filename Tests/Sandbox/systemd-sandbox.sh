#!/usr/bin/env bash
# systemd-sandbox.sh: boot a real systemd as PID 1 in fresh namespaces, for tests, without touching the host.
#
#   boot DIR [--bin FILE]... [--timeout SECONDS]
#       Runs in the foreground until stopped. DIR must be an existing, empty directory; boot writes there:
#         boot.pid  the pid of this boot process (for `stop`); removed at the end
#         cgroup    the sandbox's cgroup directory on the host; the directory is removed at teardown
#         pid       the sandboxed systemd's pid as the host sees it, written once systemd has been exec'd and
#                   removed at teardown: `nsenter -t PID -m -p -u …` enters the sandbox, and
#                   /proc/PID/root/run/systemd/system/ is its unit directory
#         boot.log  what the harness did (systemd itself logs to the sandbox's journal: `journalctl -b` inside)
#         exited    at the very end: "status=N reason=…"
#       Each --bin FILE is copied, under its own name, into a tmpfs over /usr/local/bin inside the sandbox.
#       Teardown happens on exit, SIGTERM, SIGINT, SIGHUP, after --timeout (default 600) seconds, when
#       systemd exits, when the process that started boot exits, and (done by a helper) when boot is SIGKILLed:
#       `systemctl exit`, a bounded wait, then every process left in the cgroup is killed and the cgroup
#       removed. Exit status 0 when that was clean, 1 when systemd never started or the cgroup stayed.
#   wait DIR [--timeout SECONDS]       until basic.target is active inside (default 30 s); 1 and the log if not
#   exec DIR -- COMMAND [ARGS...]      COMMAND in the sandbox's mount, pid and UTS namespaces, with the caller's
#                                      stdio and environment, cwd /; its status, or 125 if there is no sandbox
#   stop DIR [--timeout SECONDS]       tear down (default 30 s); idempotent; cleans up after a killed boot too
#   selftest                           boots, checks units, journal, logind and D-Bus, stops, checks teardown
#
# Inside, the host's / is visible except: /run, /tmp, /var/tmp, /var/log/journal, /var/lib/systemd and
# /usr/local/bin are fresh tmpfs (so the host's /tmp is NOT visible: hand files over through /proc/PID/root/…);
# /etc and /var are overlays whose writes stay in memory; /proc/sys and /sys are read-only; /dev is private.
# Needs root; without it every subcommand exits 77 (the "skipped" status of automake and meson).
# The sequence follows "Booting a real systemd for tests" in FIELD-NOTES.md; additions to it are marked
# "Beyond the field notes" below.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
readonly SELF
readonly SYSTEMD=/lib/systemd/systemd
readonly CGROUP_PREFIX=coalesced-sandbox-

# Units that would write to the host, or cannot work in a container, masked as /dev/null in /run/systemd/system.
readonly MASKED_UNITS=(
    timers.target
    systemd-sysctl.service
    systemd-binfmt.service
    proc-sys-fs-binfmt_misc.automount
    proc-sys-fs-binfmt_misc.mount
    systemd-sysusers.service
    systemd-tmpfiles-setup.service
    systemd-tmpfiles-setup-dev.service
    systemd-tmpfiles-clean.timer
    systemd-remount-fs.service
    systemd-update-utmp.service
    systemd-update-utmp-runlevel.service
    systemd-random-seed.service
    systemd-machine-id-commit.service
    systemd-journal-flush.service
    systemd-hwdb-update.service
    systemd-udevd.service
    systemd-udev-trigger.service
    systemd-modules-load.service
    systemd-firstboot.service
    systemd-journal-catalog-update.service
    systemd-update-done.service
    systemd-timesyncd.service
    ldconfig.service
)

# Bounds, in milliseconds.
readonly EXIT_GRACE_MS=5000    # systemd's own orderly exit after `systemctl exit`
readonly KILL_BOUND_MS=5000    # the cgroup to empty after it was killed
readonly START_BOUND_MS=20000  # from unshare to systemd exec'd

die() {
    printf 'systemd-sandbox: %s\n' "$*" >&2
    exit 1
}

need_root() {
    if ((EUID != 0)); then
        echo "systemd-sandbox: the systemd sandbox needs root (namespaces, cgroups, mounts); skipping" >&2
        exit 77
    fi
}

now_ms() {
    local t=${EPOCHREALTIME//[!0-9]/}
    printf -v "$1" '%d' $((10#$t / 1000))
}

# Seconds, possibly with a fraction ("1.5"), to milliseconds.
to_ms() {
    local value=$2 whole frac
    [[ $value =~ ^([0-9]+)(\.([0-9]{1,3})[0-9]*)?$ ]] || die "not a number of seconds: $value"
    whole=${BASH_REMATCH[1]}
    frac=${BASH_REMATCH[3]}000
    printf -v "$1" '%d' $((10#$whole * 1000 + 10#${frac:0:3}))
}

pause() {
    # read -t on a pipe nobody writes to: a sleep that is a builtin, so there is no child to leave behind.
    if [[ -z ${PAUSE_FD:-} ]]; then
        exec {PAUSE_FD}<> <(:)
    fi
    read -r -t "$1" -u "$PAUSE_FD" _ || true
}

write_file() {
    printf '%s\n' "$2" >"$1.tmp.$$"
    mv -f "$1.tmp.$$" "$1"
}

# The state letter of a process (R, S, Z…), or nothing when it is gone.
proc_state() {
    local stat
    { stat=$(<"/proc/$1/stat"); } 2>/dev/null || return 0
    stat=${stat##*) }
    printf '%s' "${stat%% *}"
}

proc_alive() {
    local state
    state=$(proc_state "$1")
    [[ -n $state && $state != Z ]]
}

proc_ppid() {
    local stat fields
    { stat=$(<"/proc/$1/stat"); } 2>/dev/null || return 1
    read -ra fields <<<"${stat##*) }"
    printf '%s' "${fields[1]}"
}

# Where to make the sandbox cgroup: the cgroup2 hierarchy, hybrid (/sys/fs/cgroup/unified) or unified.
cgroup_root() {
    local dir
    for dir in /sys/fs/cgroup/unified /sys/fs/cgroup; do
        if [[ $(stat -f -c %T "$dir" 2>/dev/null) == cgroup2fs ]]; then
            printf '%s' "$dir"
            return 0
        fi
    done
    return 1
}

# Refuses to act on a path that is not a sandbox cgroup made by this script.
is_sandbox_cgroup() {
    local root
    root=$(cgroup_root) || return 1
    [[ $1 == "$root/$CGROUP_PREFIX"* && $1 != */../* && ${1#"$root/"} != */* ]]
}

# Kills every process in the cgroup and its children, then removes them all. Bounded; 0 when it is gone.
remove_cgroup() {
    local cg=$1 deadline now pid
    [[ -d $cg ]] || return 0
    now_ms now
    deadline=$((now + KILL_BOUND_MS))
    while :; do
        if [[ -e $cg/cgroup.kill ]]; then
            echo 1 >"$cg/cgroup.kill" 2>/dev/null || true
        else
            while read -r pid; do
                kill -KILL "$pid" 2>/dev/null || true
            done < <(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null)
        fi
        find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
        [[ -d $cg ]] || return 0
        now_ms now
        ((now < deadline)) || return 1
        pause 0.02
    done
}

log() {
    local t=${EPOCHREALTIME}
    printf '%(%H:%M:%S)T.%s boot[%d]: %s\n' "${t%[.,]*}" "${t:(-6):3}" "$$" "$*" >&"$LOG_FD"
}

# The host pid of the process that unshare --fork made: PID 1 of the new pid namespace.
child_of() {
    local children pid stat
    if [[ -r /proc/$1/task/$1/children ]]; then
        { children=$(<"/proc/$1/task/$1/children"); } 2>/dev/null || return 0
        printf '%s' "${children%% *}"
        return 0
    fi
    for stat in /proc/[0-9]*/stat; do
        pid=${stat#/proc/}
        pid=${pid%/stat}
        if [[ $(proc_ppid "$pid" 2>/dev/null) == "$1" ]]; then
            printf '%s' "$pid"
            return 0
        fi
    done
}

# ---------------------------------------------------------------------------------------------------------------
# boot

cmd_boot() {
    need_root
    local dir="" timeout_ms=600000 bin
    BINS=()
    while (($#)); do
        case $1 in
        --bin)
            (($# >= 2)) || die "--bin needs a file"
            [[ -f $2 && -r $2 ]] || die "--bin $2: not a readable file"
            BINS+=("$(readlink -f "$2")")
            shift 2
            ;;
        --timeout)
            (($# >= 2)) || die "--timeout needs seconds"
            to_ms timeout_ms "$2"
            shift 2
            ;;
        -*) die "boot: unknown option $1" ;;
        *)
            [[ -z $dir ]] || die "boot: one DIR only"
            dir=$1
            shift
            ;;
        esac
    done
    [[ -n $dir ]] || die "usage: systemd-sandbox.sh boot DIR [--bin FILE]... [--timeout SECONDS]"
    [[ -d $dir ]] || die "boot: $dir is not a directory"
    dir=$(readlink -f "$dir")
    if [[ -s $dir/boot.pid ]] && boot_alive "$(<"$dir/boot.pid")"; then
        die "boot: a sandbox is already running for $dir"
    fi
    [[ -x $SYSTEMD ]] || die "boot: $SYSTEMD not found"
    for bin in "${BINS[@]}"; do
        [[ ${bin##*/} != *[!A-Za-z0-9._@+-]* ]] || die "boot: --bin $bin: unusual file name"
    done
    local root
    root=$(cgroup_root) || die "boot: no cgroup2 hierarchy at /sys/fs/cgroup/unified or /sys/fs/cgroup"

    rm -f "$dir/pid" "$dir/exited"
    exec {LOG_FD}>>"$dir/boot.log"
    SANDBOX_DIR=$dir
    CGROUP="" UNSHARE_PID="" SYSTEMD_PID="" WATCHER_PID="" REASON="exit" BOOT_FAILED=0 TORN_DOWN=0
    trap on_exit EXIT
    trap 'REASON=SIGTERM; exit 0' TERM
    trap 'REASON=SIGINT; exit 0' INT
    trap 'REASON=SIGHUP; exit 0' HUP
    write_file "$dir/boot.pid" "$$"

    local name
    name=$CGROUP_PREFIX$$-$SRANDOM
    CGROUP=$root/$name
    mkdir "$CGROUP"
    write_file "$dir/cgroup" "$CGROUP"
    log "cgroup $CGROUP, timeout $((timeout_ms / 1000)) s, bins: ${BINS[*]:-none}"

    local start now deadline
    now_ms start
    deadline=$((start + timeout_ms))

    # The subshell moves itself into the new cgroup, so unshare makes the cgroup namespace there. setsid keeps
    # systemd out of the caller's terminal session: a Ctrl-C there would mean ctrl-alt-del.target to systemd.
    # Beyond the field notes: --uts, so that systemd's hostname setup and hostnamectl stay inside.
    (
        echo "$BASHPID" >"$CGROUP/cgroup.procs"
        exec setsid unshare --pid --fork --mount --cgroup --uts --mount-proc --propagation private \
            -- "$SELF" __inner "${BINS[@]}" </dev/null >&"$LOG_FD" 2>&1 {LOG_FD}>&-
    ) &
    UNSHARE_PID=$!
    log "unshare is pid $UNSHARE_PID"

    local child="" exe expected
    expected=$(readlink -f "$SYSTEMD")
    while :; do
        if ! proc_alive "$UNSHARE_PID"; then
            BOOT_FAILED=1
            REASON="boot failed before systemd started (see above)"
            exit 1
        fi
        [[ -n $child ]] || child=$(child_of "$UNSHARE_PID")
        if [[ -n $child ]]; then
            exe=$(readlink "/proc/$child/exe" 2>/dev/null) || exe=""
            [[ $exe != "$expected" ]] || break
        fi
        now_ms now
        if ((now >= start + START_BOUND_MS || now >= deadline)); then
            BOOT_FAILED=1
            REASON="systemd was not running after $(((now - start) / 1000)) s"
            exit 1
        fi
        pause 0.01
    done
    SYSTEMD_PID=$child
    write_file "$dir/pid" "$SYSTEMD_PID"
    log "systemd is pid $SYSTEMD_PID on the host, $((now - start)) ms after start"

    watch_boot "$$" "$PPID" "$deadline" "$dir" &
    WATCHER_PID=$!

    local ended="" status=0
    wait -n -p ended "$UNSHARE_PID" "$WATCHER_PID" || status=$?
    if [[ $ended == "$UNSHARE_PID" ]]; then
        UNSHARE_PID=""
        REASON="systemd exited (unshare status $status)"
    elif ((status == 3)); then
        REASON="the process that started boot exited"
    else
        REASON="timeout of $((timeout_ms / 1000)) s"
    fi
    exit 0
}

# The boot process's timer and guard: exits 0 at the deadline, 3 when the caller (the parent) has gone; when
# the boot process itself has gone without tearing down (SIGKILL), it does the teardown through `stop`.
watch_boot() {
    local outer=$1 parent=$2 deadline=$3 dir=$4 now ppid
    exec {LOG_FD}>&-
    trap - EXIT TERM
    trap '' INT HUP
    while :; do
        now_ms now
        ((now < deadline)) || exit 0
        if ((deadline - now > 500)); then pause 0.5; else pause "0.$(printf '%03d' $((deadline - now)))"; fi
        if ! ppid=$(proc_ppid "$outer") || [[ $(proc_state "$outer") == Z ]]; then
            exec "$SELF" stop "$dir" >/dev/null 2>&1
        fi
        if ((parent > 1)) && [[ $ppid != "$parent" ]]; then
            exit 3
        fi
    done
}

on_exit() {
    local rc=$?
    trap '' TERM INT HUP
    set +e
    # bash reports a killed background job ("… Killed …") on stderr: that belongs in the log.
    exec 2>&"$LOG_FD"
    teardown
    local status=$?
    ((BOOT_FAILED == 0)) || status=1
    log "exit status $status ($REASON)"
    write_file "$SANDBOX_DIR/exited" "status=$status reason=$REASON"
    rm -f "$SANDBOX_DIR/boot.pid"
    ((rc == 0 || status != 0)) || status=$rc
    exit "$status"
}

teardown() {
    ((TORN_DOWN == 0)) || return 0
    TORN_DOWN=1
    log "teardown: $REASON"
    rm -f "$SANDBOX_DIR/pid"
    if [[ -n $WATCHER_PID ]]; then
        kill -KILL "$WATCHER_PID" 2>/dev/null
        wait "$WATCHER_PID" 2>/dev/null
    fi
    local now deadline
    if [[ -n $SYSTEMD_PID ]] && is_sandboxed "$SYSTEMD_PID" "$CGROUP"; then
        if timeout 3 nsenter -t "$SYSTEMD_PID" -m -p -u -- systemctl --no-block exit >/dev/null 2>&1; then
            now_ms now
            deadline=$((now + EXIT_GRACE_MS))
            while proc_alive "$SYSTEMD_PID" && ((now < deadline)); do
                pause 0.02
                now_ms now
            done
            if proc_alive "$SYSTEMD_PID"; then
                log "systemd still running after ${EXIT_GRACE_MS} ms, killing the cgroup"
            else
                log "systemd exited"
            fi
        else
            log "systemctl exit failed, killing the cgroup"
        fi
    fi
    local ok=0
    if [[ -n $CGROUP ]]; then
        if remove_cgroup "$CGROUP"; then
            log "cgroup removed"
        else
            log "cgroup $CGROUP could not be removed: $(find "$CGROUP" -name cgroup.procs -exec cat {} + 2>&1 | tr '\n' ' ')"
            ok=1
        fi
    fi
    if [[ -n $UNSHARE_PID ]]; then
        # It was in the cgroup, so it is gone; this only reaps it.
        wait "$UNSHARE_PID" 2>/dev/null
    fi
    return "$ok"
}

# Inside the namespaces, as PID 1 of the new pid namespace; stdout and stderr go to boot.log.
cmd_inner() {
    local bin unit dev=/run/.sandbox-dev overlay=/run/.sandbox-overlay node tty_gid
    say() { printf 'inner: %s\n' "$*"; }

    # The --bin files first: they may live under /run, /tmp or /var/tmp, which are hidden next.
    mount -n -t tmpfs -o mode=0755,nosuid,nodev tmpfs /usr/local/bin
    for bin in "$@"; do
        cp "$bin" "/usr/local/bin/${bin##*/}"
        chmod 0755 "/usr/local/bin/${bin##*/}"
        say "copied $bin to /usr/local/bin"
    done

    # Beyond the field notes: systemd 252 raised the host's fs.file-max and net.unix.max_dgram_qlen (a find for new
    # files cannot see that), and sysfs is the host's; as in systemd-nspawn, /proc/sys, /proc/sysrq-trigger and
    # /sys are read-only inside. cgroup2 is mounted afterwards, read-write.
    for node in /proc/sys /proc/sysrq-trigger; do
        [[ -e $node ]] || continue
        mount -n --bind "$node" "$node"
        mount -n -o remount,bind,ro "$node"
    done
    umount -n -R /sys/fs/cgroup
    mount -n -o remount,bind,ro /sys
    mount -n -t cgroup2 -o nosuid,nodev,noexec cgroup2 /sys/fs/cgroup
    mount -n -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
    mkdir -m 1777 /run/lock

    # Beyond the field notes: /etc and /var as overlays whose upper layer is a tmpfs, so that what tests do
    # (systemctl enable, set-property, mask without --runtime; StateDirectory=, LogsDirectory=, CacheDirectory=)
    # lands in memory, while the host's files stay readable. The tmpfs is detached once the overlays hold it.
    mkdir "$overlay"
    mount -n -t tmpfs -o mode=0700 tmpfs "$overlay"
    for node in etc var; do
        mkdir "$overlay/$node" "$overlay/$node/upper" "$overlay/$node/work"
        mount -n -t overlay -o "lowerdir=/$node,upperdir=$overlay/$node/upper,workdir=$overlay/$node/work" \
            overlay "/$node"
    done
    umount -n -l "$overlay"
    rmdir "$overlay"

    mount -n -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
    mount -n -t tmpfs -o mode=1777,nosuid,nodev tmpfs /var/tmp
    mount -n -t tmpfs -o mode=2755,nosuid,nodev tmpfs /var/log/journal
    mount -n -t tmpfs -o mode=0755,nosuid,nodev tmpfs /var/lib/systemd
    say "read-only /proc/sys /sys; cgroup2; overlays on /etc /var; tmpfs over /run /usr/local/bin /tmp /var/tmp" \
        "/var/log/journal /var/lib/systemd"

    mkdir "$dev"
    mount -n -t tmpfs -o mode=0755,nosuid tmpfs "$dev"
    for node in null zero full random urandom tty; do
        touch "$dev/$node"
        mount -n --bind "/dev/$node" "$dev/$node"
    done
    mkdir "$dev/pts" "$dev/shm"
    tty_gid=$(getent group tty | cut -d: -f3) || tty_gid=5
    mount -n -t devpts -o "newinstance,ptmxmode=0666,mode=0620,gid=$tty_gid" devpts "$dev/pts"
    ln -s pts/ptmx "$dev/ptmx"
    mount -n -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$dev/shm"
    ln -s /proc/self/fd "$dev/fd"
    ln -s /proc/self/fd/0 "$dev/stdin"
    ln -s /proc/self/fd/1 "$dev/stdout"
    ln -s /proc/self/fd/2 "$dev/stderr"
    mount -n --move "$dev" /dev
    rmdir "$dev"
    say "private /dev in place"

    mkdir -p /run/systemd/system
    for unit in "${MASKED_UNITS[@]}"; do
        ln -s /dev/null "/run/systemd/system/$unit"
    done
    # The clock is the host's: timedated's SetTimezone tells the kernel the zone (settimeofday), and the first such
    # call since boot warps the host's clock by the zone's offset. Without CAP_SYS_TIME that call fails, which
    # timedated ignores; the zone link inside the sandbox still changes.
    mkdir -p /run/systemd/system/systemd-timedated.service.d
    printf '[Service]\nCapabilityBoundingSet=~CAP_SYS_TIME\n' >/run/systemd/system/systemd-timedated.service.d/sandbox.conf
    say "masked ${#MASKED_UNITS[@]} units; exec $SYSTEMD"

    cd /
    exec env -i container=other "$SYSTEMD" --system --unit=basic.target
}

# ---------------------------------------------------------------------------------------------------------------
# wait, exec, stop

boot_alive() {
    local cmdline
    proc_alive "$1" || return 1
    cmdline=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
    [[ $cmdline == *systemd-sandbox* && $cmdline == *" boot "* ]]
}

# The sandboxed systemd's host pid from DIR/pid, if that process is still the one in the sandbox cgroup.
sandbox_pid() {
    local pid cg
    [[ -s $1/pid && -s $1/cgroup ]] || return 1
    pid=$(<"$1/pid")
    cg=$(<"$1/cgroup")
    [[ $pid =~ ^[0-9]+$ ]] && is_sandboxed "$pid" "$cg" || return 1
    printf '%s' "$pid"
}

# Whether PID runs in another pid namespace, inside the sandbox cgroup CGROUP. Checked before every nsenter:
# a recycled pid must never get `systemctl exit`, which on a host's systemd means poweroff.
is_sandboxed() {
    local pid=$1 cg=$2 root line
    proc_alive "$pid" || return 1
    [[ $(readlink "/proc/$pid/ns/pid" 2>/dev/null) != "$(readlink /proc/self/ns/pid)" ]] || return 1
    root=$(cgroup_root) || return 1
    [[ $cg == "$root/"* ]] || return 1
    { line=$(grep -m1 '^0::' "/proc/$pid/cgroup"); } 2>/dev/null || return 1
    [[ ${line#0::} == "${cg#"$root"}" || ${line#0::} == "${cg#"$root"}/"* ]]
}

parse_dir_timeout() {
    # Sets DIR and TIMEOUT_MS from "DIR [--timeout SECONDS]".
    DIR=""
    while (($#)); do
        case $1 in
        --timeout)
            (($# >= 2)) || die "--timeout needs seconds"
            to_ms TIMEOUT_MS "$2"
            shift 2
            ;;
        -*) die "unknown option $1" ;;
        *)
            [[ -z $DIR ]] || die "one DIR only"
            DIR=$1
            shift
            ;;
        esac
    done
    [[ -n $DIR ]] || die "a DIR is needed"
}

cmd_wait() {
    need_root
    TIMEOUT_MS=30000
    parse_dir_timeout "$@"
    local start now pid state="" last=""
    now_ms start
    while :; do
        if pid=$(sandbox_pid "$DIR"); then
            state=$(timeout 5 nsenter -t "$pid" -m -p -u -- systemctl is-active basic.target 2>/dev/null) || true
            [[ $state != active ]] || return 0
            last="basic.target is ${state:-not answering}"
        elif [[ -s $DIR/exited ]]; then
            wait_failed "the sandbox boot process has exited: $(<"$DIR/exited")"
        else
            last="no systemd pid in $DIR/pid yet"
        fi
        now_ms now
        ((now - start < TIMEOUT_MS)) || wait_failed "systemd sandbox not up after $TIMEOUT_MS ms: $last"
        pause 0.05
    done
}

wait_failed() {
    echo "systemd-sandbox: $*" >&2
    if [[ -s $DIR/boot.log ]]; then
        echo "--- last lines of $DIR/boot.log:" >&2
        tail -n 20 "$DIR/boot.log" >&2
    fi
    exit 1
}

cmd_exec() {
    need_root
    if (($# < 3)) || [[ $2 != -- ]]; then
        echo "usage: systemd-sandbox.sh exec DIR -- COMMAND [ARGS...]" >&2
        exit 125
    fi
    local dir=$1 pid
    shift 2
    if ! pid=$(sandbox_pid "$dir"); then
        echo "systemd-sandbox: no running sandbox in $dir" >&2
        exit 125
    fi
    exec nsenter -t "$pid" -m -p -u -- "$@"
}

cmd_stop() {
    need_root
    TIMEOUT_MS=30000
    parse_dir_timeout "$@"
    local start now bootpid="" pid cg=""
    now_ms start
    [[ ! -s $DIR/boot.pid ]] || bootpid=$(<"$DIR/boot.pid")
    if [[ -n $bootpid ]] && boot_alive "$bootpid"; then
        kill -TERM "$bootpid" 2>/dev/null || true
        while boot_alive "$bootpid"; do
            now_ms now
            ((now - start < TIMEOUT_MS)) || die "stop: the boot process $bootpid is still running after $TIMEOUT_MS ms"
            pause 0.02
        done
    fi
    # The boot process is gone. If it was killed before it could tear down, do it here.
    [[ ! -s $DIR/cgroup ]] || cg=$(<"$DIR/cgroup")
    if [[ -n $cg && -d $cg ]]; then
        is_sandbox_cgroup "$cg" || die "stop: $DIR/cgroup names $cg, which is not a sandbox cgroup"
        if pid=$(sandbox_pid "$DIR"); then
            timeout 3 nsenter -t "$pid" -m -p -u -- systemctl --no-block exit >/dev/null 2>&1 || true
            while proc_alive "$pid"; do
                now_ms now
                ((now - start < EXIT_GRACE_MS)) || break
                pause 0.02
            done
        fi
        remove_cgroup "$cg" || die "stop: could not empty and remove $cg"
        rm -f "$DIR/pid" "$DIR/boot.pid"
        [[ -s $DIR/exited ]] || write_file "$DIR/exited" "status=0 reason=cleaned up by stop"
    fi
    return 0
}

# ---------------------------------------------------------------------------------------------------------------
# selftest

cmd_selftest() {
    need_root
    local tmp passed=0 failed=0 pid cg boot_status start now state canary
    tmp=$(mktemp -d /tmp/coalesced-sandbox-selftest.XXXXXX)
    canary=$(mktemp /tmp/coalesced-sandbox-canary.XXXXXX)
    local dev_before sysctl_before sysctls=(fs.file-max fs.nr_open net.unix.max_dgram_qlen kernel.hostname)
    dev_before=$(ls -A /dev)
    sysctl_before=$(sysctl -n "${sysctls[@]}")
    # Globals: the EXIT trap runs after this function's locals are gone.
    SELFTEST_DIR=$tmp SELFTEST_CANARY=$canary SELFTEST_BOOT_PID=""
    trap selftest_cleanup EXIT

    sx() { "$SELF" exec "$tmp" -- "$@"; }
    check() {
        local name=$1
        shift
        if "$@"; then
            passed=$((passed + 1))
            echo "ok   $name"
        else
            failed=$((failed + 1))
            echo "FAIL $name"
        fi
    }

    cat >"$tmp/sandbox-selftest-bin" <<'EOF'
#!/bin/sh
echo "selftest bin ran as pid $$"
echo ok >"${STATE_DIRECTORY:-/run}/ok"
EOF
    chmod +x "$tmp/sandbox-selftest-bin"

    now_ms start
    "$SELF" boot "$tmp" --bin "$tmp/sandbox-selftest-bin" --timeout 120 &
    SELFTEST_BOOT_PID=$!
    if ! "$SELF" wait "$tmp" --timeout 30; then
        echo "FAIL boot: basic.target not reached"
        echo "selftest: $passed passed, 1 failed"
        exit 1
    fi
    now_ms now
    pid=$(<"$tmp/pid")
    cg=$(<"$tmp/cgroup")
    passed=$((passed + 1))
    echo "ok   boot: basic.target active $((now - start)) ms after boot started (systemd is host pid $pid)"
    state=$(sx systemctl is-system-running 2>/dev/null) || true
    echo "info systemctl is-system-running after boot: $state"

    check "PID 1 inside is systemd" test "$(sx cat /proc/1/comm)" = systemd
    check "transient unit runs: systemd-run --wait /bin/true" sx systemd-run --quiet --unit=sandbox-probe --wait /bin/true
    check "a failing transient unit reports failure" eval '! sx systemd-run --quiet --wait /bin/false'
    check "exit status passes through exec" eval 'sx sh -c "exit 7"; test $? -eq 7'

    sx systemd-cat -t sandbox-probe echo hello
    selftest_journal() {
        local i
        for ((i = 0; i < 50; i++)); do
            sx journalctl --sync >/dev/null 2>&1 || true
            sx journalctl -q -t sandbox-probe -o json 2>/dev/null | grep -q '"MESSAGE":"hello"' && return 0
            pause 0.1
        done
        return 1
    }
    check "journal: systemd-cat line seen by journalctl -t sandbox-probe -o json" selftest_journal

    cat >"/proc/$pid/root/run/systemd/system/sandbox-selftest.service" <<'EOF'
[Service]
Type=oneshot
RemainAfterExit=yes
StateDirectory=sandbox-selftest
ExecStart=/usr/local/bin/sandbox-selftest-bin
EOF
    check "daemon-reload" sx systemctl daemon-reload
    check "unit file in /proc/PID/root/run/systemd/system starts, runs the --bin copy" \
        sx systemctl start sandbox-selftest.service
    check "its StateDirectory is inside the sandbox" test -s "/proc/$pid/root/var/lib/sandbox-selftest/ok"
    check "and not on the host" test ! -e /var/lib/sandbox-selftest
    check "host /usr/local/bin untouched" test ! -e /usr/local/bin/sandbox-selftest-bin
    check "/etc is writable inside, not on the host" eval \
        'sx touch /etc/sandbox-selftest && test ! -e /etc/sandbox-selftest'
    check "/proc/sys is read-only inside" eval '! sx sh -c "echo 512 >/proc/sys/net/unix/max_dgram_qlen" 2>/dev/null'

    check "systemctl start systemd-logind" sx systemctl start systemd-logind
    check "D-Bus answers and logind is on it: busctl list" eval 'sx busctl list --no-pager | grep -q org.freedesktop.login1'
    state=$(sx systemctl is-system-running 2>/dev/null) || true
    echo "info systemctl is-system-running now: $state (a failed unit, here the /bin/false one, makes it degraded)"

    check "stop exits 0" "$SELF" stop "$tmp" --timeout 20
    boot_status=0
    wait "$SELFTEST_BOOT_PID" || boot_status=$?
    SELFTEST_BOOT_PID=""
    check "boot exited 0 ($(cat "$tmp/exited" 2>/dev/null))" test "$boot_status" -eq 0
    check "cgroup $cg removed" test ! -e "$cg"
    check "sandboxed systemd gone" eval "! kill -0 $pid 2>/dev/null"
    selftest_no_leftovers() { ! grep -qs "${cg##*/}" /proc/[0-9]*/cgroup; }
    check "no process left in the sandbox cgroup" selftest_no_leftovers
    check "stop again is a no-op" "$SELF" stop "$tmp"
    check "host /tmp canary survived" test -e "$canary"
    check "host /dev unchanged (no /dev/log, /dev/initctl)" test "$(ls -A /dev)" = "$dev_before"
    check "host sysctls and hostname unchanged" test "$(sysctl -n "${sysctls[@]}")" = "$sysctl_before"

    if ((failed > 0)); then
        echo "--- $tmp/boot.log:"
        cat "$tmp/boot.log"
    fi
    echo "selftest: $passed passed, $failed failed"
    ((failed == 0))
}

selftest_cleanup() {
    local rc=$?
    if [[ -n $SELFTEST_BOOT_PID ]]; then
        "$SELF" stop "$SELFTEST_DIR" >/dev/null 2>&1 || true
        wait "$SELFTEST_BOOT_PID" 2>/dev/null || true
    fi
    rm -rf "$SELFTEST_DIR" "$SELFTEST_CANARY"
    exit "$rc"
}

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$SELF"
}

main() {
    local cmd=${1:-}
    (($#)) && shift
    case $cmd in
    boot) cmd_boot "$@" ;;
    wait) cmd_wait "$@" ;;
    exec) cmd_exec "$@" ;;
    stop) cmd_stop "$@" ;;
    selftest) cmd_selftest "$@" ;;
    __inner) cmd_inner "$@" ;;
    -h | --help | help) usage ;;
    *)
        usage >&2
        exit 2
        ;;
    esac
}

main "$@"
