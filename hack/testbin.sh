#!/usr/bin/env bash
# Builds the real control-plane binaries TauGrid tests and the local cluster run
# against, from the Go module proxy, into a cache directory outside the repo keyed
# by the pinned versions. A binary already in the cache is not rebuilt.
#
#   hack/testbin.sh            build what is missing, print the directory
#   hack/testbin.sh --dir      print the directory only
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
mod="$root/hack/testbin"

# Pinned versions. Kueue and KubeRay match the API types in the main go.mod.
K8S_VERSION=v1.37.2
KUEUE_VERSION=$(cd "$root" && go list -m -f '{{.Version}}' sigs.k8s.io/kueue)
KUBERAY_VERSION=$(cd "$root" && go list -m -f '{{.Version}}' github.com/ray-project/kuberay/ray-operator)
KWOK_VERSION=v0.8.0
# Gitea, the real forge of the forge tests: not a dependency of any module
# here, so pinned by hand; the newest release on the module proxy.
GITEA_VERSION=v1.27.3
ETCD_VERSION=$(cd "$mod" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)

sum=$(sha256sum "$mod/go.sum" | cut -c1-8)
cache=${TAU_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/taugrid/testbin}
dir="$cache/k8s-$K8S_VERSION.etcd-$ETCD_VERSION.kueue-$KUEUE_VERSION.kuberay-$KUBERAY_VERSION.kwok-$KWOK_VERSION.$sum"
# Gitea has its own entry, keyed by its version alone, so that moving it
# rebuilds nothing else; $dir/gitea links to it.
gitea_dir="$cache/gitea-$GITEA_VERSION"

if [ "${1:-}" = "--dir" ]; then
	echo "$dir"
	exit 0
fi
mkdir -p "$dir"

minor=$(echo "$K8S_VERSION" | cut -d. -f2)
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"

step() { # name, command...
	local name=$1
	shift
	if [ -x "$dir/$name" ]; then
		echo "testbin: $name: cached" >&2
		return
	fi
	echo "testbin: building $name ..." >&2
	local start=$SECONDS
	if ! "$@"; then
		echo "testbin: FAILED to build $name (command: $*)" >&2
		exit 1
	fi
	echo "testbin: $name built in $((SECONDS - start))s" >&2
}

build_mod() { # name: a main package of the nested module
	(cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dir/$1.tmp" "./$1") && mv "$dir/$1.tmp" "$dir/$1"
}

install() { # name, package@version
	local tmp
	tmp=$(mktemp -d)
	GOBIN="$tmp" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "$2" && mv "$tmp/$(basename "${2%@*}")" "$dir/$1"
	rm -rf "$tmp"
}

# Gitea's go.mod has replace directives, so `go install` refuses it: build
# a writable copy of the module's tree. Without the bindata tag the binary
# reads its locales, templates and public files at run time: they are kept
# under root/ next to it (the harness points STATIC_ROOT_PATH there).
build_gitea() {
	local src tmp
	src=$(go mod download -json code.gitea.io/gitea@"$GITEA_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$src" ] || return 1
	tmp=$(mktemp -d)
	cp -r "$src" "$tmp/src" && chmod -R u+w "$tmp/src" &&
		(cd "$tmp/src" && go build -trimpath -tags 'sqlite sqlite_unlock_notify' \
			-ldflags "-s -w -X main.Version=${GITEA_VERSION#v}" -o "$tmp/gitea" .) &&
		rm -rf "$gitea_dir" && mkdir -p "$gitea_dir/root" &&
		cp -r "$tmp/src/options" "$tmp/src/templates" "$tmp/src/public" "$gitea_dir/root/" &&
		mv "$tmp/gitea" "$gitea_dir/gitea"
	local rc=$?
	rm -rf "$tmp"
	return $rc
}

link_gitea() {
	if [ ! -x "$gitea_dir/gitea" ] || [ ! -d "$gitea_dir/root/options/locale" ]; then
		build_gitea || return 1
	fi
	ln -sfn "$gitea_dir/gitea" "$dir/gitea"
}

step etcd build_mod etcd
step kube-apiserver build_mod kube-apiserver
step kueue install kueue sigs.k8s.io/kueue/cmd/kueue@"$KUEUE_VERSION"
step kuberay-operator install kuberay-operator github.com/ray-project/kuberay/ray-operator@"$KUBERAY_VERSION"
step gitea link_gitea
if [ "${TAU_TESTBIN_MINIMAL:-}" = "" ]; then
	step kube-controller-manager build_mod kube-controller-manager
	step kube-scheduler build_mod kube-scheduler
	step kwok install kwok sigs.k8s.io/kwok/cmd/kwok@"$KWOK_VERSION"
	step kwokctl install kwokctl sigs.k8s.io/kwok/cmd/kwokctl@"$KWOK_VERSION"
fi
echo "$dir"
