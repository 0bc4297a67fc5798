# Sourced by the scripts that build into the shared cache (GPUSHARE_CACHE): two
# set-ups on one machine (two checkouts) build each thing once, one after the other.
# cache_lock NAME holds an exclusive lock on $CACHE/.locks/NAME.lock until the script
# exits; a second build of the same NAME waits for it, then finds the result cached.
# Results are still written to a temporary name and renamed, so a reader (a running
# cluster, a suite) never sees half a file.
cache_lock() {
  mkdir -p "$CACHE/.locks"
  exec {cache_lock_fd}>"$CACHE/.locks/$1.lock"
  if ! flock -n "$cache_lock_fd"; then
    echo "[cache] another set-up is building $1; waiting for it" >&2
    flock "$cache_lock_fd"
  fi
}
