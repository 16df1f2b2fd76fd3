#!/bin/sh
# pipelines/deps.sh: install the Debian/Ubuntu packages lmpipe needs, from
# the distribution's archive alone, when some are missing.
#   pipelines/deps.sh           build, tests and the demo
#   pipelines/deps.sh --check   only say what is missing (exit 1 if any)
# Needs root (or sudo) to install.  The CUDA toolkit is optional and not
# installed here: with nvcc on the PATH the CUDA parts are built too.
set -eu
# build: compiler, zstd, jansson, OpenBLAS; tests: perl (prove), mandoc,
# groff-base (man.t), unicode-data (make unicode); demo: fortunes (the corpus),
# gnuplot (plots); the data pipeline (pipelines/data.mk) and its tests: the
# decompressors doc-cat runs (gzip, zstd, xz-utils), GNU parallel, and a
# one-host Slurm (slurm-wlm, munge) that tests/data-slurm.t starts; lm-train's
# data parallel ranks on the CPU (OpenMPI: libopenmpi-dev, openmpi-bin).
pkgs="build-essential perl libzstd-dev libjansson-dev libopenblas-dev mandoc groff-base unicode-data gnuplot-nox fortunes
gzip zstd xz-utils parallel slurm-wlm munge libopenmpi-dev openmpi-bin"
# make fuzz (CI runs it): clang with libFuzzer and OpenMP, where the archive
# has these names (Debian 12); without them make fuzz skips
fuzz_pkgs="clang-14 libclang-rt-14-dev libomp-14-dev"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
for p in $fuzz_pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		{ apt-cache show "$p" >/dev/null 2>&1 && missing="$missing $p"; }
done
[ -z "$missing" ] && exit 0
if [ "${1:-}" = --check ]; then
	echo "deps.sh: missing packages:$missing" >&2
	exit 1
fi
if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO=sudo; else
	echo "deps.sh: missing packages:$missing; install them as root: apt-get install$missing" >&2
	exit 1
fi
echo "deps.sh: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
