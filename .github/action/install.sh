#!/usr/bin/env bash
# The action's first step: puts a volley on PATH and names it in the step's
# `bin` output. Either a release, downloaded and checked against its
# .sha256, or a build of the action's own source with cargo.
#
# Environment: VOLLEY_VERSION (X.Y.Z, vX.Y.Z or "latest"), BUILD ("true" to build),
# ACTION_PATH (the action's checkout), RUNNER_OS, RUNNER_ARCH, RUNNER_TEMP,
# GITHUB_OUTPUT, GITHUB_PATH; VOLLEY_RELEASES overrides where releases are
# downloaded from (a test's file:// directory).
set -euo pipefail

repo_releases=${VOLLEY_RELEASES:-https://github.com/volley-rs/volley/releases}

fail() {
  echo "::error::volley action: $*" >&2
  exit 1
}

exe=""
[ "${RUNNER_OS:-}" = Windows ] && exe=".exe"

if [ "${BUILD:-false}" = true ]; then
  command -v cargo >/dev/null || fail "build-from-source: cargo is not installed (add dtolnay/rust-toolchain first)"
  cargo build --release --locked --manifest-path "$ACTION_PATH/Cargo.toml" --target-dir "$ACTION_PATH/target" --bin volley
  bin="$ACTION_PATH/target/release/volley$exe"
else
  case "${RUNNER_OS:-}/${RUNNER_ARCH:-}" in
    Linux/X64) target=x86_64-unknown-linux-musl ;;
    Linux/ARM64) target=aarch64-unknown-linux-musl ;;
    macOS/ARM64) target=aarch64-apple-darwin ;;
    macOS/X64) target=x86_64-apple-darwin ;;
    Windows/X64) target=x86_64-pc-windows-msvc ;;
    *) fail "no release binary for ${RUNNER_OS:-?} on ${RUNNER_ARCH:-?}: set build-from-source: true" ;;
  esac
  version=${VOLLEY_VERSION#v}
  if [ "$version" = latest ]; then
    # The latest release's page redirects to its tag: no API token needed.
    latest=$(curl -fsSLI -o /dev/null -w '%{url_effective}' "$repo_releases/latest") \
      || fail "version: cannot find the latest release at $repo_releases/latest"
    version=${latest##*/v}
  fi
  [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]] \
    || fail "version: '$VOLLEY_VERSION' is not a version such as 0.2.0 (or latest)"
  name="volley-v$version-$target"
  case "$target" in
    *-windows-*) archive="$name.zip" ;;
    *) archive="$name.tar.gz" ;;
  esac
  dir="${RUNNER_TEMP:?}/volley-$version"
  mkdir -p "$dir"
  for file in "$archive" "$archive.sha256"; do
    curl -fsSL --retry 3 -o "$dir/$file" "$repo_releases/download/v$version/$file" \
      || fail "version: cannot download $file of volley $version from $repo_releases"
  done
  # The .sha256 file names the archive beside it: check it there.
  if command -v sha256sum >/dev/null; then
    (cd "$dir" && sha256sum -c "$archive.sha256" >/dev/null) || fail "$archive does not match its sha256: not installed"
  else
    (cd "$dir" && shasum -a 256 -c "$archive.sha256" >/dev/null) || fail "$archive does not match its sha256: not installed"
  fi
  case "$archive" in
    *.zip) (cd "$dir" && unzip -qo "$archive") ;;
    *) tar -C "$dir" -xzf "$dir/$archive" ;;
  esac
  bin="$dir/$name/volley$exe"
  echo "$dir/$name" >> "$GITHUB_PATH"
fi

[ -x "$bin" ] || fail "$bin was not made"
"$bin" --version
echo "bin=$bin" >> "$GITHUB_OUTPUT"
