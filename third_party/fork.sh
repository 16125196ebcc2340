#!/usr/bin/env bash
# The engine fork's bookkeeping: third_party/compute against the published upstream module it
# forks, whose version is the main go.mod's `require github.com/gomlx/compute` line (the replace
# points that requirement at ./third_party/compute). See third_party/README.md.
#
#   fork.sh diff [FILE]     write the fork's patch against upstream (default third_party/compute.patch)
#   fork.sh check           fail unless the committed patch is current and rebuilds the fork from upstream
#   fork.sh generate        run the fork's `go generate ./...` with the pinned tools; fail unless
#                           git status of third_party/compute stays clean
#   fork.sh upstream DIR    write the pristine upstream source into DIR (new or empty)
#   fork.sh rebase VERSION  start a rebase onto upstream VERSION in a scratch git repository
#   fork.sh adopt DIR       replace third_party/compute with the files of DIR's git HEAD
set -euo pipefail

MODULE=github.com/gomlx/compute
# Pinned generator tools. enumer is the version GoMLX v0.28.2 pins as its `go tool`; it rewrites
# the fork's gen_*_enumer.go byte for byte. gofmt (run by the generators) is the local toolchain's.
ENUMER=github.com/dmarkham/enumer@v1.6.1

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FORK=$ROOT/third_party/compute
PATCH=$ROOT/third_party/compute.patch

# Git with no user or system configuration, so a diff.* or core.* setting cannot change the patch.
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
g() { git -c user.name=temper-fork -c user.email=fork@temper.invalid -c core.autocrlf=false -c init.defaultBranch=upstream "$@"; }

die() {
	echo "fork.sh: $*" >&2
	exit 1
}

# Scratch space of this run, removed when it ends (a rebase's repository is made outside it).
TMP=$(mktemp -d "${TMPDIR:-/tmp}/temper-fork.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# base_version prints the upstream version the fork is based on (the main module's requirement).
base_version() {
	local v
	v=$(cd "$ROOT" && go mod edit -json | sed -n "/\"Path\": \"${MODULE//\//\\/}\",\$/{n;s/^.*\"Version\": \"\(.*\)\".*\$/\1/p;q}")
	[ -n "$v" ] || die "base version: no 'require $MODULE' in $ROOT/go.mod"
	echo "$v"
}

# download prints "DIR SUM" of MODULE@$1 from the module cache, downloading it (checked against
# the checksum database, like every module download) when absent.
download() {
	local json dir sum
	json=$(cd "$TMP" && GOFLAGS='' GO111MODULE=on go mod download -json "$MODULE@$1") ||
		die "download $MODULE@$1: $json"
	dir=$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' <<<"$json")
	sum=$(sed -n 's/^\t"Sum": "\(.*\)",$/\1/p' <<<"$json")
	if [ ! -d "$dir" ] || [ -z "$sum" ]; then
		die "download $MODULE@$1: no directory in: $json"
	fi
	echo "$dir $sum"
}

# replace_tree makes $1 (a git work tree) hold exactly the files under $2 listed by `git ls-files`
# run in $2 with the remaining arguments ($2 may be the fork or another git repository).
replace_tree() {
	local dst=$1 src=$2 f
	shift 2
	find "$dst" -mindepth 1 -maxdepth 1 ! -name .git -exec rm -rf {} +
	(cd "$src" && git ls-files -z "$@" .) | while IFS= read -r -d '' f; do
		[ -e "$src/$f" ] || [ -L "$src/$f" ] || continue # deleted in the work tree
		mkdir -p "$dst/$(dirname "$f")"
		cp -P "$src/$f" "$dst/$f"
	done
}

# copy_upstream writes the pristine source of version $2 into directory $1.
copy_upstream() {
	local got
	got=$(download "$2")
	cp -R "${got% *}/." "$1/"
	chmod -R u+w "$1"
}

# write_patch writes the patch of the fork's work tree (tracked and untracked, not ignored files)
# against upstream to $1.
write_patch() {
	local out=$1 version got sum work=$TMP/patch
	version=$(base_version)
	got=$(download "$version")
	sum=${got#* }
	rm -rf "$work"
	g init -q "$work"
	copy_upstream "$work" "$version"
	g -C "$work" add -A -f
	g -C "$work" commit -q -m "$MODULE $version"
	replace_tree "$work" "$FORK" --cached --others --exclude-standard
	g -C "$work" add -A -f
	local opts=(--no-renames --no-color --no-ext-diff --diff-algorithm=myers)
	{
		echo "# third_party/compute against $MODULE $version ($sum), as the module proxy publishes it."
		echo "# Written by \`make fork-diff\` (third_party/fork.sh diff): do not edit; TestPatchIsCurrent"
		echo "# (third_party/compute/internal/forkpatch) fails when it is stale. Applies with \`git apply\`"
		echo "# in a pristine copy (\`third_party/fork.sh upstream DIR\`); see third_party/README.md."
		echo "#"
		g -C "$work" diff --cached "${opts[@]}" --stat=100 | sed 's/^/# /'
		echo
		g -C "$work" diff --cached "${opts[@]}" --binary --full-index
	} >"$out"
}

cmd_diff() {
	local out=${1:-$PATCH}
	write_patch "$out.tmp"
	mv "$out.tmp" "$out"
	echo "fork.sh: wrote $out ($(grep -c '^diff --git' "$out") files differ from upstream $(base_version))"
}

cmd_check() {
	[ -f "$PATCH" ] || die "check: $PATCH is missing: run make fork-diff"
	local work=$TMP/check
	mkdir -p "$work"
	write_patch "$work/current.patch"
	if ! cmp -s "$PATCH" "$work/current.patch"; then
		diff -u "$PATCH" "$work/current.patch" | head -40 >&2 || true
		die "check: third_party/compute.patch is stale (the fork changed since it was written): run make fork-diff and commit it"
	fi
	# The patch alone rebuilds the fork from the pristine upstream.
	mkdir "$work/u" "$work/fork"
	copy_upstream "$work/u" "$(base_version)"
	(cd "$work/u" && git apply --whitespace=nowarn "$PATCH") || die "check: git apply of $PATCH to upstream $(base_version) failed"
	replace_tree "$work/fork" "$FORK" --cached --others --exclude-standard
	diff -r "$work/u" "$work/fork" >&2 || die "check: upstream + third_party/compute.patch differs from third_party/compute (above)"
	echo "fork.sh: third_party/compute.patch is current and rebuilds the fork from $MODULE $(base_version)"
}

cmd_generate() {
	[ "$(go env GOHOSTARCH)" = amd64 ] || die "generate: needs an amd64 host (the amd64 SIMD files hold go:generate lines)"
	local work=$TMP
	# The pinned enumer as a `go tool` of a scratch copy of the fork's go.mod: neither the fork's
	# go.mod (which upstream publishes) nor the main module's build list change.
	cp "$FORK/go.mod" "$work/gen.mod"
	cp "$FORK/go.sum" "$work/gen.sum"
	local flags="-mod=mod -modfile=$work/gen.mod"
	(cd "$FORK" && GOFLAGS=$flags go get -tool "$ENUMER") || die "generate: go get -tool $ENUMER failed"
	echo "fork.sh: go generate ./... in third_party/compute with $(go version | cut -d' ' -f3) and enumer ${ENUMER#*@}"
	(cd "$FORK" && GOFLAGS=$flags GOEXPERIMENT=simd GOOS=linux GOARCH=amd64 go generate ./...) >"$work/log" 2>&1 ||
		{
			cat "$work/log" >&2
			die "generate: go generate failed"
		}
	local changed
	changed=$(cd "$ROOT" && git status --porcelain --untracked-files=all -- third_party/compute)
	if [ -n "$changed" ]; then
		echo "$changed" >&2
		die "generate: git status of third_party/compute is not clean after go generate (above): uncommitted edits, or a committed generated file that differs from what its generator writes (edit the generator's input, not its output; then commit the regenerated files)"
	fi
	echo "fork.sh: every generated file is what its generator writes (git status clean)"
}

cmd_upstream() {
	local dir=${1:?usage: fork.sh upstream DIR}
	mkdir -p "$dir"
	[ -z "$(ls -A "$dir")" ] || die "upstream: $dir is not empty"
	copy_upstream "$dir" "$(base_version)"
	echo "fork.sh: $MODULE $(base_version) in $dir"
}

cmd_rebase() {
	local new=${1:?usage: fork.sh rebase VERSION}
	local old work
	old=$(base_version)
	work=$(mktemp -d "${TMPDIR:-/tmp}/compute-rebase.XXXXXX")
	g init -q "$work"
	copy_upstream "$work" "$old"
	g -C "$work" add -A -f
	g -C "$work" commit -q -m "$MODULE $old"
	g -C "$work" checkout -q -b fork
	replace_tree "$work" "$FORK" --cached --others --exclude-standard
	g -C "$work" add -A -f
	g -C "$work" commit -q -m "Temper fork (third_party/compute at $(git -C "$ROOT" rev-parse --short HEAD), on $old)"
	g -C "$work" checkout -q upstream
	find "$work" -mindepth 1 -maxdepth 1 ! -name .git -exec rm -rf {} +
	copy_upstream "$work" "$new"
	g -C "$work" add -A -f
	g -C "$work" commit -q -m "$MODULE $new"
	g -C "$work" checkout -q fork
	if g -C "$work" rebase -q upstream; then
		echo "fork.sh: the fork rebased onto $new without conflicts in $work"
	else
		echo "fork.sh: rebase onto $new stopped on conflicts in $work:"
		g -C "$work" status --short | grep -E '^(UU|AA|DU|UD|AU|UA|DD) ' || true
		echo "resolve them there (git -C $work status), then: git -C $work add -A && git -C $work -c core.editor=true rebase --continue"
	fi
	echo "then: third_party/fork.sh adopt $work  (and the remaining steps of third_party/README.md)"
}

cmd_adopt() {
	local dir=${1:?usage: fork.sh adopt DIR}
	[ -d "$dir/.git" ] || die "adopt: $dir is not a git repository (made by fork.sh rebase)"
	[ -z "$(git -C "$dir" status --porcelain)" ] || die "adopt: $dir has uncommitted changes or an unfinished rebase"
	grep -qx "module $MODULE" "$dir/go.mod" 2>/dev/null || die "adopt: $dir/go.mod is not module $MODULE"
	replace_tree "$FORK" "$dir" --cached
	echo "fork.sh: third_party/compute now holds $dir's HEAD ($(git -C "$dir" log -1 --format=%s))"
}

case ${1:-} in
diff) cmd_diff "${@:2}" ;;
check) cmd_check ;;
generate) cmd_generate ;;
upstream) cmd_upstream "${@:2}" ;;
rebase) cmd_rebase "${@:2}" ;;
adopt) cmd_adopt "${@:2}" ;;
*) die "usage: fork.sh diff [FILE] | check | generate | upstream DIR | rebase VERSION | adopt DIR" ;;
esac
