# Sourced by tests/mutants/schema.sh and policy.sh: runs cargo-mutants over a crate of its own
# ($crate, made by the caller) and prints one line of counts. Outputs go to $work/<name>/.
#
#   crate_mutants NAME [cargo-mutants arguments...]
crate_mutants() {
  local name=$1
  shift
  cargo mutants -d "$crate" --output "$work/$name" --timeout 60 "$@" \
    > "$work/$name.log" 2>&1 || true
  local dir=$work/$name/mutants.out
  printf '%-22s %4s caught %4s missed %4s timeout %4s unviable\n' "$name" \
    "$(wc -l < "$dir/caught.txt")" "$(wc -l < "$dir/missed.txt")" \
    "$(wc -l < "$dir/timeout.txt")" "$(wc -l < "$dir/unviable.txt")"
}
