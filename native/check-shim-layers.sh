#!/bin/sh
# The isolation shim's layers, one way (make -C native check-layers):
#
#   shim_config  the base: configuration, modes, faults   includes no shim header
#   shim_usage   the container-wide accounting            shim_config.h
#   shim_pool    the stream-ordered pools' accounting     shim_usage.h, shim_config.h
#   the hooks    shim.c, shim_ctx.c, shim_vmm.c, shim_array.c, shim_loader.c, with
#                their headers shim_cuda.h and shim_loader.h, on top of all three
#
# Each lower part's .c and .h may include (directly or through the headers it
# includes) only the shim headers of its own layer and those below; never a hooks'
# header.  What the pools need of the hooks reaches them as shim_pool_host_t.
# Usage: check-shim-layers.sh [SRC_DIR]  (default: the src next to this script)
set -eu
src=${1:-$(dirname "$0")/src}
status=0

# The local headers a file includes ("..." includes), directly.
direct() { sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$1"; }

# The local headers a file includes, directly or through other local headers.
closure() {
    seen=" "
    todo=$(direct "$1")
    while [ -n "$todo" ]; do
        next=""
        for h in $todo; do
            case "$seen" in *" $h "*) continue ;; esac
            seen="$seen$h "
            [ -f "$src/$h" ] && next="$next $(direct "$src/$h")"
        done
        todo=$next
    done
    echo $seen
}

# check FILE ALLOWED...: FILE must exist and include only ALLOWED local headers.
check() {
    file=$1
    shift
    if [ ! -f "$src/$file" ]; then
        echo "check-shim-layers: $src/$file missing" >&2
        status=1
        return
    fi
    for h in $(closure "$src/$file"); do
        ok=0
        for a in "$@"; do [ "$h" = "$a" ] && ok=1; done
        if [ $ok -eq 0 ]; then
            echo "check-shim-layers: $file includes $h, above its layer (allowed: ${*:-none})" >&2
            status=1
        fi
    done
}

check shim_config.h
check shim_config.c shim_config.h
check shim_usage.h shim_config.h
check shim_usage.c shim_usage.h shim_config.h
check shim_pool.h shim_usage.h shim_config.h
check shim_pool.c shim_pool.h shim_usage.h shim_config.h

# The hooks' names never appear in the lower layers' code either (the pools reach the
# hooks only through shim_pool_host).
hooks='shim_cuda_mode|shim_real_cuda|shim_refuse_cuda|shim_card_of_device|shim_current_card|shim_card_limit|shim_untrack|shim_track|shim_tracks_nothing|shim_loader_|shim_libc_function|gpushare_dlsym_hook'
for f in shim_config.h shim_config.c shim_usage.h shim_usage.c shim_pool.h shim_pool.c; do
    if grep -nE "\\b($hooks)\\b" "$src/$f" >&2; then
        echo "check-shim-layers: $f names a hooks' function or variable (above)" >&2
        status=1
    fi
done
exit $status
