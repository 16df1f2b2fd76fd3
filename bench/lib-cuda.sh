# bench/lib-cuda.sh: sourced by the scripts of the CUDA benchmarks, with
# ROOT and CUDA_HOME set.  cuda_bench BIN SRC [ARG...]: when BIN is missing,
# build it from SRC and ARG (its libraries: build/libkernels.a from a CUDA
# build, -lcublasLt, ...).
cuda_bench() {
	cb_bin=$1 cb_src=$2
	shift 2
	[ -x "$cb_bin" ] && return 0
	mkdir -p "$(dirname "$cb_bin")"
	${CC:-cc} -std=c11 -O2 -I"$ROOT" -I"$CUDA_HOME/include" -o "$cb_bin" "$cb_src" "$@" \
		-L"$CUDA_HOME/lib64" -Wl,-rpath,"$CUDA_HOME/lib64" -lcudart -lstdc++ -lm -fopenmp
}
