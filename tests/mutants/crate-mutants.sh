# Sourced by tests/mutants/schema.sh and policy.sh, which each judge one part of the models in
# a crate of its own, first by its unit tests, then with an oracle's dumped verdicts.

# crate_work NAME: cargo-mutants installed, and a fresh work folder $work
# (target/mutants/NAME) holding the crate folder $crate with its tests/.
crate_work() {
  if ! command -v cargo-mutants > /dev/null; then
    cargo install --locked cargo-mutants@27.1.0
  fi
  work=$PWD/target/mutants/$1
  crate=$work/crate
  rm -rf "$work"
  mkdir -p "$crate/tests"
}

# oracle_dump FILE CARGO-TEST-ARGUMENTS...: runs an oracle test, its dump variables set by the
# caller, and stops unless it wrote FILE (a skipped test writes nothing).
oracle_dump() {
  local file=$1
  shift
  cargo test -q "$@" > "$work/dump.log" 2>&1 || { cat "$work/dump.log"; exit 1; }
  if [ ! -s "$file" ]; then
    echo "$0: the oracle test wrote nothing to $file (was it skipped?):" >&2
    cat "$work/dump.log" >&2
    exit 1
  fi
}

# crate_manifest PACKAGE DEPENDENCY...: the crate's Cargo.toml, a workspace of its own, with
# each named dependency as the project's Cargo.toml pins it, and the project's Cargo.lock.
crate_manifest() {
  local package=$1
  shift
  local deps=""
  for d in "$@"; do deps+="$(grep -E "^$d *=" Cargo.toml)"$'\n'; done
  cp Cargo.lock "$crate/Cargo.lock"
  cat > "$crate/Cargo.toml" <<TOML
[package]
name = "$package"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
$deps
[workspace]
TOML
}

# crate_mutants NAME [cargo-mutants arguments...]: runs cargo-mutants over $crate and prints one
# line of counts. Outputs go to $work/NAME/.
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
