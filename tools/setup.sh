#!/usr/bin/env bash
# Installs the Debian packages remat's build and tests need, when they are missing.
# Fast and silent when everything is present. Called by `make test`, `make run`,
# `make san` and `make bench`.
set -eu

# gcc/make: the build; coinor-libcbc-dev, coinor-libclp-dev: CBC and Clp, the MILP and LP
# solvers of the optimal strategy; libdnnl-dev:
# oneDNN 2.x for the cpu backend; libprotobuf-c-dev, protobuf-c-compiler and python3-onnx
# (its onnx.proto): the ONNX reader; python3: the independent oracles and JSON checks of
# the tests; python3-torch, python3-torchvision: the ONNX exports and PyTorch reference
# gradients the ONNX tests make; libonnx-testdata: ONNX's operator conformance cases;
# clang: the fuzz target; chromium: the suite renders `remat report`'s page headless;
# fortunes: a text corpus for the character-level language model; libopenmpi-dev and
# openmpi-bin: data-parallel training over MPI.
packages="gcc make coinor-libcbc-dev coinor-libclp-dev libdnnl-dev libprotobuf-c-dev protobuf-c-compiler python3
python3-onnx python3-torch python3-torchvision libonnx-testdata clang chromium fortunes
libopenmpi-dev openmpi-bin"

missing=""
for p in $packages; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

echo "setup: installing$missing" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install$missing" >&2; exit 1; }
    sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
