#!/usr/bin/env bash
# Packs the release archives: one per target, each with the binary, README,
# licences, CHANGELOG, shell completions and man pages, and a .sha256 file
# beside it.
#
#   package-release.sh VERSION HOST_VOLLEY BINS_DIR OUT_DIR
#
# BINS_DIR holds a directory per target, `bin-TARGET/`, with `volley` (or
# `volley.exe`), as actions/download-artifact lays them out. HOST_VOLLEY is
# a volley that runs here: it writes the completions and man pages, which
# are the same text for every target. Run from the repository's root.
# Archive names follow Cargo.toml's [package.metadata.binstall].
set -euo pipefail

if [ "$#" -ne 4 ]; then
  echo "usage: $0 VERSION HOST_VOLLEY BINS_DIR OUT_DIR" >&2
  exit 1
fi
version=$1 host=$2 bins=$3 out=$4

# The binary that writes the extras must be the version being released.
shown=$("$host" --version)
case "$shown" in
  "volley $version "*) ;;
  *) echo "$host --version says '$shown', not volley $version" >&2; exit 1 ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
extras="$work/extras"
mkdir -p "$extras/complete" "$extras/doc"
"$host" completions bash > "$extras/complete/volley.bash"
"$host" completions zsh > "$extras/complete/_volley"
"$host" completions fish > "$extras/complete/volley.fish"
"$host" completions powershell > "$extras/complete/_volley.ps1"
"$host" completions elvish > "$extras/complete/volley.elv"
"$host" man --dir "$extras/doc" > /dev/null

mkdir -p "$out"
found=0
for dir in "$bins"/bin-*/; do
  target=$(basename "$dir")
  target=${target#bin-}
  name="volley-v$version-$target"
  stage="$work/$name"
  mkdir -p "$stage"
  if [ -f "$dir/volley.exe" ]; then
    cp "$dir/volley.exe" "$stage/"
  elif [ -f "$dir/volley" ]; then
    cp "$dir/volley" "$stage/"
    # Artifacts lose their mode on the way here.
    chmod 755 "$stage/volley"
  else
    echo "$dir holds no volley binary" >&2
    exit 1
  fi
  cp README.md CHANGELOG.md LICENSE-MIT LICENSE-APACHE "$stage/"
  cp -R "$extras/complete" "$extras/doc" "$stage/"
  case "$target" in
    *-windows-*) archive="$name.zip"; (cd "$work" && zip -qr "$archive" "$name") ;;
    *) archive="$name.tar.gz"; tar -C "$work" -czf "$work/$archive" "$name" ;;
  esac
  mv "$work/$archive" "$out/"
  # `sha256sum -c NAME.sha256` checks it, beside the archive.
  (cd "$out" && sha256sum "$archive" > "$archive.sha256")
  echo "$out/$archive"
  found=$((found + 1))
done
if [ "$found" -eq 0 ]; then
  echo "$bins holds no bin-TARGET directory" >&2
  exit 1
fi
