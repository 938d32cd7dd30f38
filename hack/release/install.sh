#!/bin/sh
# Installs the tau CLI from a TauGrid release: downloads the archive for
# this machine and the release's SHA256SUMS, checks the archive against
# it, and puts tau into a directory you choose. It never edits PATH or a
# shell profile; it says how to add the directory when it is not on PATH.
#
#   sh install.sh --version v1.2.3 [--dir ~/.local/bin] [--base-url URL]
#
# --base-url is where the release's files are: URL/<version>/<file>
# (default: the GitHub release downloads of taugrid/taugrid).
set -eu

version=""
dir="${HOME}/.local/bin"
base_url="https://github.com/taugrid/taugrid/releases/download"

die() { echo "install.sh: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
	case "$1" in
	--version) [ $# -ge 2 ] || die "--version needs a value"; version="$2"; shift 2 ;;
	--dir) [ $# -ge 2 ] || die "--dir needs a value"; dir="$2"; shift 2 ;;
	--base-url) [ $# -ge 2 ] || die "--base-url needs a value"; base_url="${2%/}"; shift 2 ;;
	-h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done
[ -n "$version" ] || die "--version is required (the release to install, as v1.2.3)"

case "$(uname -s)" in
Linux) os=linux ;;
Darwin) os=darwin ;;
*) die "no tau release for $(uname -s): Linux and macOS here; install.ps1 for Windows" ;;
esac
case "$(uname -m)" in
x86_64|amd64) arch=amd64 ;;
aarch64|arm64) arch=arm64 ;;
*) die "no tau release for $(uname -m): amd64 and arm64 only" ;;
esac

archive="tau_${version}_${os}_${arch}.tar.gz"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

fetch() {
	if command -v curl >/dev/null 2>&1; then
		curl -fsSL -o "$2" "$1"
	elif command -v wget >/dev/null 2>&1; then
		wget -q -O "$2" "$1"
	else
		die "neither curl nor wget is installed"
	fi
}

fetch "$base_url/$version/SHA256SUMS" "$tmp/SHA256SUMS" || die "cannot download $base_url/$version/SHA256SUMS"
fetch "$base_url/$version/$archive" "$tmp/$archive" || die "cannot download $base_url/$version/$archive"

want="$(awk -v f="$archive" '$2 == f { print $1 }' "$tmp/SHA256SUMS")"
[ -n "$want" ] || die "SHA256SUMS of $version lists no $archive"
if command -v sha256sum >/dev/null 2>&1; then
	got="$(sha256sum "$tmp/$archive" | awk '{ print $1 }')"
else
	got="$(shasum -a 256 "$tmp/$archive" | awk '{ print $1 }')"
fi
[ "$got" = "$want" ] || die "$archive does not match SHA256SUMS (got $got, want $want): nothing installed"

mkdir -p "$tmp/x"
tar -xzf "$tmp/$archive" -C "$tmp/x" tau || die "cannot unpack $archive"
mkdir -p "$dir"
cp "$tmp/x/tau" "$dir/tau.new"
chmod 0755 "$dir/tau.new"
mv -f "$dir/tau.new" "$dir/tau"
echo "installed tau $version into $dir/tau"

case ":${PATH}:" in
*":${dir}:"*) ;;
*) echo "$dir is not on your PATH. To use tau by name, add it, e.g. in your shell's profile:"
   echo "  export PATH=\"$dir:\$PATH\"" ;;
esac
